package kube

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/fluxd/fluxd/helmrelease"
	"github.com/fluxd/fluxd/platform"
)

// FieldManager is the server-side apply field manager of fluxd's changes.
const FieldManager = "fluxd"

// resources maps the workload kinds fluxd manages to their API resources.
var resources = map[string]schema.GroupVersionResource{
	"deployment":  {Group: "apps", Version: "v1", Resource: "deployments"},
	"statefulset": {Group: "apps", Version: "v1", Resource: "statefulsets"},
	"daemonset":   {Group: "apps", Version: "v1", Resource: "daemonsets"},
	"cronjob":     {Group: "batch", Version: "v1", Resource: "cronjobs"},
}

// Apply applies one workload's manifest (YAML or JSON) with server-side
// apply, as field manager "fluxd", taking over conflicting fields: git is
// the source of truth. It returns the workload's generation after the
// apply, which its rollout must reach. A workload an autoscaler targets
// is applied without spec.replicas (autoscale.go).
func (c *Cluster) Apply(ctx context.Context, id platform.ID, manifest []byte) (int64, error) {
	obj, gvr, err := c.parse(id, manifest)
	if err != nil {
		return 0, err
	}
	if c.dynamic == nil {
		return 0, fmt.Errorf("applying %s: no dynamic client", id)
	}
	if c.autoscaled(ctx, id) {
		c.leaveReplicas(ctx, gvr, obj)
	}
	out, err := c.dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj,
		metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		if id.Kind == platform.KindHelmRelease && meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && id.Kind == platform.KindHelmRelease {
			if v := servedVersion(c, gvr.Group, nil); v != "" && v != gvr.Version {
				return 0, fmt.Errorf("applying %s to the cluster: %w; the cluster serves HelmReleases at %s/%s, not at %s as git writes it: change its apiVersion in git to %s/%s (fluxd applies and writes back the version git has)", id, err, gvr.Group, v, gvr.GroupVersion(), gvr.Group, v)
			}
			return 0, fmt.Errorf("applying %s to the cluster: %w; the cluster does not serve %s: install Flux's helm-controller (or its HelmRelease CRD) first", id, err, gvr.GroupVersion())
		}
		return 0, fmt.Errorf("applying %s to the cluster: %w", id, err)
	}
	if id.Kind == platform.KindHelmRelease {
		c.kickHelm()
	}
	return out.GetGeneration(), nil
}

// MayApply says, before a release commits anything, whether Apply would
// refuse manifest: it does not parse, is not the workload id, or is what
// git may not apply (SetGuard).
func (c *Cluster) MayApply(id platform.ID, manifest []byte) error {
	_, _, err := c.parse(id, manifest)
	return err
}

// parse reads a workload's manifest and checks it as Apply does.
func (c *Cluster) parse(id platform.ID, manifest []byte) (*unstructured.Unstructured, schema.GroupVersionResource, error) {
	var obj unstructured.Unstructured
	if err := yaml.Unmarshal(manifest, &obj.Object); err != nil {
		return nil, schema.GroupVersionResource{}, fmt.Errorf("applying %s: the manifest does not parse: %w", id, err)
	}
	if got := strings.ToLower(obj.GetKind()); got != id.Kind || obj.GetName() != id.Name {
		return nil, schema.GroupVersionResource{}, fmt.Errorf("applying %s: the manifest is a %s named %q", id, obj.GetKind(), obj.GetName())
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(id.Namespace)
	}
	if err := c.guard.Check(&obj); err != nil {
		return nil, schema.GroupVersionResource{}, fmt.Errorf("applying %s: %w", id, err)
	}
	gvr, ok := resources[id.Kind]
	if id.Kind == platform.KindHelmRelease {
		// A HelmRelease is applied at the version git writes.
		gv, err := schema.ParseGroupVersion(obj.GetAPIVersion())
		if err != nil || !helmrelease.IsHelmRelease(obj.GetAPIVersion(), obj.GetKind()) {
			return nil, schema.GroupVersionResource{}, fmt.Errorf("applying %s: apiVersion %q is not a Flux HelmRelease's (helm.toolkit.fluxcd.io/v2, or helm.fluxcd.io/v1)", id, obj.GetAPIVersion())
		}
		gvr, ok = gv.WithResource("helmreleases"), true
	}
	if !ok {
		return nil, schema.GroupVersionResource{}, fmt.Errorf("applying %s: fluxd does not manage kind %s", id, id.Kind)
	}
	return &obj, gvr, nil
}
