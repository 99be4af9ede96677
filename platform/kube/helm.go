package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/fluxd/fluxd/helmrelease"
	"github.com/fluxd/fluxd/platform"
)

// HelmReleases are watched only where their CustomResourceDefinition is
// served: a cluster without Flux's CRDs (most of them) costs one
// discovery request now and then, and nothing breaks. fluxd looks again
// every helmRediscover, and at once after it applies a HelmRelease, so
// that a CRD installed after fluxd started is picked up.

// helmGroups are the HelmRelease API groups fluxd reads, each with its
// versions in order of preference; one version per group is watched (the
// API server serves the same objects at every version).
var helmGroups = []struct {
	group    string
	versions []string
}{
	{"helm.toolkit.fluxcd.io", []string{"v2", "v2beta2", "v2beta1"}},
	{"helm.fluxcd.io", []string{"v1"}},
}

// helmRediscover is how often fluxd looks for a HelmRelease CRD it has
// not found yet.
var helmRediscover = time.Minute

// helmWatch is the HelmRelease informers started so far, by group.
type helmWatch struct {
	mu        sync.Mutex
	informers map[string][]cache.SharedIndexInformer
	kick      chan struct{}
}

// watchHelm starts an informer for each HelmRelease group the API server
// serves, looking again until every group is watched or ctx ends.
func (c *Cluster) watchHelm(ctx context.Context, namespaces []string, resync time.Duration) {
	if c.dynamic == nil {
		return
	}
	t := time.NewTicker(helmRediscover)
	defer t.Stop()
	for {
		if c.discoverHelm(ctx, namespaces, resync) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.helm.kick:
		}
	}
}

// discoverHelm starts the informers of the groups now served; it reports
// whether every group is watched. Discovery runs without the lock, so that
// a slow API server never holds Workloads.
func (c *Cluster) discoverHelm(ctx context.Context, namespaces []string, resync time.Duration) bool {
	all := true
	for _, g := range helmGroups {
		c.helm.mu.Lock()
		_, watched := c.helm.informers[g.group]
		c.helm.mu.Unlock()
		if watched {
			continue
		}
		version := servedVersion(c, g.group, g.versions)
		if version == "" {
			all = false
			continue
		}
		gvr := schema.GroupVersionResource{Group: g.group, Version: version, Resource: "helmreleases"}
		bump := func(any) { c.gen.Add(1) }
		events := cache.ResourceEventHandlerFuncs{AddFunc: bump, UpdateFunc: func(_, o any) { bump(o) }, DeleteFunc: bump}
		var infs []cache.SharedIndexInformer
		for _, ns := range namespaces {
			f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dynamic, resync, ns, nil)
			inf := f.ForResource(gvr).Informer()
			_ = inf.SetTransform(stripManagedFields)
			_, _ = inf.AddEventHandler(events)
			f.Start(ctx.Done())
			infs = append(infs, inf)
		}
		c.helm.mu.Lock()
		if c.helm.informers == nil {
			c.helm.informers = map[string][]cache.SharedIndexInformer{}
		}
		c.helm.informers[g.group] = infs
		c.helm.mu.Unlock()
		slog.Default().Info("watching HelmReleases", "component", "cluster", "apiVersion", g.group+"/"+version)
	}
	return all
}

// servedVersion is the version at which the API server serves group's
// helmreleases: the group's preferred version, as discovery says (so that
// a version newer than fluxd knows is followed as Flux moves on), else
// the first of versions it serves; "" when none.
func servedVersion(c *Cluster, group string, versions []string) string {
	if groups, err := c.client.Discovery().ServerGroups(); err == nil {
		for _, g := range groups.Groups {
			if g.Name != group {
				continue
			}
			if v := g.PreferredVersion.Version; v != "" && servesHelmReleases(c, group, v) {
				return v
			}
		}
	}
	for _, v := range versions {
		if servesHelmReleases(c, group, v) {
			return v
		}
	}
	return ""
}

// servesHelmReleases says whether group/version has a helmreleases
// resource.
func servesHelmReleases(c *Cluster, group, version string) bool {
	list, err := c.client.Discovery().ServerResourcesForGroupVersion(group + "/" + version)
	if err != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == "helmreleases" {
			return true
		}
	}
	return false
}

// kickHelm asks watchHelm to look for HelmRelease CRDs now.
func (c *Cluster) kickHelm() {
	select {
	case c.helm.kick <- struct{}{}:
	default:
	}
}

// helmReleases are the HelmReleases in the caches, their replicas those
// of the owned workloads that are theirs (helmprogress.go).
func (c *Cluster) helmReleases(owned []*helmOwned) []platform.Workload {
	c.helm.mu.Lock()
	defer c.helm.mu.Unlock()
	var out []platform.Workload
	groups := make([]string, 0, len(c.helm.informers))
	for g := range c.helm.informers {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		for _, inf := range c.helm.informers[g] {
			for _, o := range inf.GetStore().List() {
				if u, ok := o.(*unstructured.Unstructured); ok {
					w := fromHelmRelease(u)
					w.Replicas = helmReplicas(helmReleaseKeys(u), owned)
					out = append(out, w)
				}
			}
		}
	}
	return out
}

// fromHelmRelease reads a HelmRelease: its containers are the images its
// values name, and it has rolled out when its controller says it is
// Ready (Flux v1's helm-operator: Released) at its generation.
func fromHelmRelease(u *unstructured.Unstructured) platform.Workload {
	w := platform.Workload{
		ID:         platform.ID{Namespace: u.GetNamespace(), Kind: platform.KindHelmRelease, Name: u.GetName()},
		Generation: u.GetGeneration(),
		Status:     "updating",
	}
	values, _, _ := unstructured.NestedMap(u.Object, "spec", "values")
	imgs, _, err := helmrelease.FindIn(u.GetAnnotations(), values)
	if err == nil {
		for _, img := range imgs {
			w.Containers = append(w.Containers, platform.Container{Name: img.Name, Image: img.Ref})
		}
	}
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	want := "Ready"
	if u.GroupVersionKind().Group == "helm.fluxcd.io" {
		want = "Released"
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, x := range conds {
		cond, _ := x.(map[string]any)
		if cond["type"] != want {
			continue
		}
		// The condition's own observedGeneration, where the controller
		// writes one, says which spec it is about.
		if g, ok, _ := unstructured.NestedInt64(cond, "observedGeneration"); ok {
			observed = g
		}
		w.ObservedGeneration = observed
		switch cond["status"] {
		case "True":
			if observed >= w.Generation {
				w.Status = "ready"
			}
		case "False":
			if observed >= w.Generation {
				w.Stuck = fmt.Sprintf("its %s condition is False: %v: %v", want, cond["reason"], cond["message"])
			}
		}
	}
	if w.ObservedGeneration == 0 {
		w.ObservedGeneration = observed
	}
	return w
}

// helmControllerSelectors find the pods of a Helm controller, as Flux's
// install (flux install, the Flux Operator, the fluxcd-community chart)
// and Flux v1's helm-operator chart label them.
var helmControllerSelectors = []string{
	"app in (helm-controller,helm-operator)",
	"app.kubernetes.io/component=helm-controller",
	"app.kubernetes.io/name in (helm-controller,helm-operator)",
}

// HelmControllerAbsent says why no Helm controller will act on a
// HelmRelease: no pod in the cluster is labelled as one and alive. It
// says "" when one is, and errs when fluxd cannot tell (deploy/rbac.yaml
// grants pods per watched namespace, not in every one).
func (c *Cluster) HelmControllerAbsent(ctx context.Context) (string, error) {
	for _, sel := range helmControllerSelectors {
		pods, err := c.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return "", fmt.Errorf("listing pods in every namespace: %w", err)
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return "", nil
			}
		}
	}
	return "no Helm controller runs in the cluster (no pod labelled app=helm-controller or app=helm-operator is alive): install Flux's helm-controller, or scale it up", nil
}
