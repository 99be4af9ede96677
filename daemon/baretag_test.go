package daemon

import (
	"context"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
)

// specReleaser records the spec it is asked to plan.
type specReleaser struct {
	stubReleaser
	mu    sync.Mutex
	specs []release.Spec
}

func (r *specReleaser) Plan(_ context.Context, s release.Spec) (*release.Plan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.specs = append(r.specs, s)
	return &release.Plan{}, nil
}

// `release -s web --update-image 1.2.0`: a tag alone is of the named
// services' own repository; where that is not one repository, the caller
// is asked for the full image.
func TestReleaseBareTag(t *testing.T) {
	wl := func(name string, images ...string) platform.Workload {
		w := platform.Workload{ID: platform.ID{Namespace: "default", Kind: "deployment", Name: name}}
		for i, img := range images {
			w.Containers = append(w.Containers, platform.Container{Name: "c" + string(rune('0'+i)), Image: img})
		}
		return w
	}
	cluster := &stubCluster{workloads: []platform.Workload{
		wl("web", "reg.example/team/web:1.0.0"),
		wl("web2", "reg.example/team/web:1.0.1"),
		wl("sidecar", "reg.example/team/web:1.0.0", "reg.example/envoy:1.30"),
		// Pinned by digest (fluxd.io/pin-digest): the same repository.
		wl("pinned", "reg.example/team/web:1.0.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"),
	}}
	rel := &specReleaser{}
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: rel, Jobs: stubJobs{}})
	ctx := withToken(f.tokens[auth.Deployer])
	plan := func(image string, services ...string) error {
		_, err := f.client.Release(ctx, &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN,
			Spec: &fluxdv1.ReleaseSpec{Services: services, Image: image, User: "u"}})
		return err
	}
	if err := plan("1.2.0", "web", "web2"); err != nil {
		t.Fatal(err)
	}
	if err := plan("reg.example/other:3", "web"); err != nil {
		t.Fatal(err)
	}
	if err := plan("1.2.0", "web", "pinned"); err != nil {
		t.Fatal(err)
	}
	if got := []string{rel.specs[0].Image, rel.specs[1].Image, rel.specs[2].Image}; got[0] != "reg.example/team/web:1.2.0" || got[1] != "reg.example/other:3" || got[2] != "reg.example/team/web:1.2.0" {
		t.Errorf("planned images %q; want the bare tag on the services' repository (a pinned one's too), and a full image as given", got)
	}
	for _, tc := range []struct {
		services []string
		msg      string
	}{
		{[]string{"sidecar"}, "several repositories: reg.example/envoy (default:deployment/sidecar c1); reg.example/team/web (default:deployment/sidecar c0)"},
		{nil, "a tag alone, and no service is named"},
	} {
		err := plan("1.2.0", tc.services...)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.msg) {
			t.Errorf("bare tag for %v: %v; want InvalidArgument saying %q", tc.services, err, tc.msg)
		}
	}
}
