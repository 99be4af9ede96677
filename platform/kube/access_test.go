package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/platform/kube/gitguard"
)

// The access a release asks for: the namespace watched, and patch on
// the workload's resource there, asked once per namespace and resource
// for accessTTL; a refusal names the RoleBinding the install would add.
func TestMayRelease(t *testing.T) {
	client := fake.NewClientset()
	var reviews []authorizationv1.ResourceAttributes
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		ra := *r.Spec.ResourceAttributes
		reviews = append(reviews, ra)
		r.Status.Allowed = ra.Namespace == "team-a" && ra.Verb == "patch"
		return true, r, nil
	})
	c := newCluster(client, "fake", Config{Namespaces: []string{"team-a", "team-b"}})
	c.SetGuard(gitguard.New(gitguard.Config{Self: gitguard.Self{Namespaces: []string{"flux-sys"}, ServiceAccount: "flux-sys/fluxd"}}))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.access.now = func() time.Time { return now }
	ctx := context.Background()
	web := func(ns string) platform.ID { return platform.ID{Namespace: ns, Kind: "deployment", Name: "web"} }

	if err := c.MayRelease(ctx, web("team-a")); err != nil {
		t.Errorf("team-a, watched and bound: %v", err)
	}
	err := c.MayRelease(ctx, web("team-b"))
	if !errors.Is(err, platform.ErrForbidden) {
		t.Fatalf("team-b, watched, not bound: %v; want ErrForbidden", err)
	}
	for _, want := range []string{"namespace team-b", "ServiceAccount flux-sys/fluxd", "kubectl -n team-b create rolebinding fluxd-workloads-flux-sys --clusterrole=fluxd-workloads --serviceaccount=flux-sys:fluxd", "Nothing was committed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q:\n%v", want, err)
		}
	}
	err = c.MayRelease(ctx, web("team-c"))
	if !errors.Is(err, platform.ErrNotWatched) || !strings.Contains(err.Error(), "--watch-namespace team-a --watch-namespace team-b --watch-namespace team-c") {
		t.Errorf("team-c, not watched: %v; want ErrNotWatched saying how to watch it", err)
	}
	if len(reviews) != 2 || reviews[0].Group != "apps" || reviews[0].Resource != "deployments" {
		t.Fatalf("access reviews %+v; want one per watched namespace, for patch on apps deployments", reviews)
	}
	// Reused for accessTTL, then asked again.
	_ = c.MayRelease(ctx, platform.ID{Namespace: "team-b", Kind: "deployment", Name: "other"})
	if len(reviews) != 2 {
		t.Errorf("asked again within accessTTL: %d reviews", len(reviews))
	}
	now = now.Add(accessTTL)
	_ = c.MayRelease(ctx, web("team-b"))
	if len(reviews) != 3 {
		t.Errorf("not asked again after accessTTL: %d reviews", len(reviews))
	}
	// Every namespace watched: only the review refuses.
	all := newCluster(client, "fake", Config{})
	if err := all.Watched(web("anywhere")); err != nil {
		t.Errorf("watching all namespaces: %v", err)
	}
}
