package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// accessTTL is how long an access review's answer is reused: a release
// plans twice (before and under the git lock), the daemon's listing asks
// for every service it builds, and the status page plans often. A
// binding added or removed is seen within this long.
const accessTTL = 10 * time.Second

// accessCache keeps access reviews' answers per namespace and resource.
type accessCache struct {
	mu      sync.Mutex
	answers map[accessKey]accessAnswer
	now     func() time.Time
}

type accessKey struct {
	namespace string
	resource  schema.GroupResource
}

type accessAnswer struct {
	allowed bool
	reason  string // the authorizer's, when it gave one
	at      time.Time
}

// Watched refuses, without a request, a workload in a namespace fluxd
// does not watch (Config.Namespaces): its informers never see it, so a
// release could apply it but never follow its rollout. The error wraps
// platform.ErrNotWatched and says how to watch the namespace.
func (c *Cluster) Watched(id platform.ID) error {
	if c.watches(id.Namespace) {
		return nil
	}
	ns := strings.Join(c.namespaces, ",")
	return fluxerr.New(fluxerr.Precondition,
		fmt.Errorf("%w: %s is in namespace %s, and fluxd watches only %s (--namespaces)", platform.ErrNotWatched, id, id.Namespace, ns),
		fmt.Sprintf("fluxd releases, automates and applies only workloads it watches, so that it can follow their rollout; nothing was committed. "+
			"To release in %[1]s, add it to fluxd's namespaces and bind fluxd's workload role there: render the install again with "+
			"'fluxctl install ... --watch-namespace %[2]s --watch-namespace %[1]s | kubectl apply -f -' (it adds %[1]s to --namespaces and the RoleBinding %[3]s in it). "+
			"If the workload is not meant for this fluxd, move it out of the paths it reads (--git-path).",
			id.Namespace, strings.Join(c.namespaces, " --watch-namespace "), c.bindingName()))
}

// watches reports whether ns is one of the namespaces fluxd watches.
func (c *Cluster) watches(ns string) bool {
	return slices.Contains(c.namespaces, corev1.NamespaceAll) || slices.Contains(c.namespaces, ns)
}

// MayRelease refuses a workload that fluxd does not watch (Watched), or
// whose kind its credentials may not patch (server-side apply is a
// patch) in its namespace, asking the API server with a
// SelfSubjectAccessReview (answers reused for accessTTL). A refusal wraps
// platform.ErrNotWatched or platform.ErrForbidden and names the
// RoleBinding to add; an error asking wraps neither.
func (c *Cluster) MayRelease(ctx context.Context, id platform.ID) error {
	if err := c.Watched(id); err != nil {
		return err
	}
	gr, ok := accessResource(id.Kind)
	if !ok {
		return nil // not a kind fluxd applies itself (an ImagePolicy's service)
	}
	a, err := c.access.review(ctx, c, id.Namespace, gr)
	if err != nil {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("asking the API server whether fluxd may patch %s in namespace %s: %w", gr, id.Namespace, err),
			"Nothing was committed. Check that the API server answers (fluxctl list-services), then try again.")
	}
	if a.allowed {
		return nil
	}
	why := ""
	if a.reason != "" {
		why = " (" + a.reason + ")"
	}
	self := c.guard.Self()
	sa := self.ServiceAccount
	subject := "--serviceaccount=" + strings.Replace(sa, "/", ":", 1)
	if sa == "" {
		sa, subject = "fluxd's credentials", "--serviceaccount=FLUXD_NAMESPACE:fluxd"
	} else {
		sa = "ServiceAccount " + sa
	}
	return fluxerr.New(fluxerr.Precondition,
		fmt.Errorf("%w: %s may not patch %s in namespace %s%s", platform.ErrForbidden, sa, gr, id.Namespace, why),
		fmt.Sprintf("Nothing was committed. fluxd's workload role is bound per namespace, and not in %[1]s. To let fluxd release there, bind it: "+
			"render the install again with '--watch-namespace %[1]s' added (fluxctl install ... | kubectl apply -f -), or create the RoleBinding "+
			"yourself: kubectl -n %[1]s create rolebinding %[2]s --clusterrole=fluxd-workloads %[3]s",
			id.Namespace, c.bindingName(), subject))
}

// bindingName is the RoleBinding the install puts in each watched
// namespace: fluxd-workloads-<fluxd's namespace> (deploy/rbac.yaml).
func (c *Cluster) bindingName() string {
	self := c.guard.Self()
	if ns, _, ok := strings.Cut(self.ServiceAccount, "/"); ok && ns != "" {
		return "fluxd-workloads-" + ns
	}
	if len(self.Namespaces) > 0 {
		return "fluxd-workloads-" + self.Namespaces[0]
	}
	return "fluxd-workloads-FLUXD_NAMESPACE"
}

// accessResource is the API resource a release of kind patches.
func accessResource(kind string) (schema.GroupResource, bool) {
	if kind == platform.KindHelmRelease {
		// Flux v2's; the install grants Flux v1's group in the same rule.
		return schema.GroupResource{Group: "helm.toolkit.fluxcd.io", Resource: "helmreleases"}, true
	}
	gvr, ok := resources[kind]
	return gvr.GroupResource(), ok
}

// review answers whether fluxd may patch gr in ns, from an answer younger
// than accessTTL or a new SelfSubjectAccessReview.
func (a *accessCache) review(ctx context.Context, c *Cluster, ns string, gr schema.GroupResource) (accessAnswer, error) {
	now := time.Now
	if a.now != nil {
		now = a.now
	}
	k := accessKey{ns, gr}
	a.mu.Lock()
	got, ok := a.answers[k]
	a.mu.Unlock()
	if ok && now().Sub(got.at) < accessTTL {
		return got, nil
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := c.client.AuthorizationV1().SelfSubjectAccessReviews().Create(rctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "patch", Group: gr.Group, Resource: gr.Resource}},
	}, metav1.CreateOptions{})
	if err != nil {
		return accessAnswer{}, err
	}
	got = accessAnswer{allowed: r.Status.Allowed && !r.Status.Denied, reason: r.Status.Reason, at: now()}
	a.mu.Lock()
	if a.answers == nil {
		a.answers = map[accessKey]accessAnswer{}
	}
	a.answers[k] = got
	a.mu.Unlock()
	return got, nil
}
