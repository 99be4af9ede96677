package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// slowRegistry refreshes only when the test says so (or fails), and has a
// cache of what an earlier refresh read.
type slowRegistry struct {
	release chan struct{}
	err     error
	cached  []registry.Image
	status  registry.RefreshStatus
}

func (r *slowRegistry) Images(ctx context.Context, repo string) ([]registry.Image, error) {
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(r.cached, registry.Image{Repository: repo, Tag: "new"}), nil
}

func (r *slowRegistry) Cached(context.Context, string) ([]registry.Image, error) {
	return r.cached, nil
}
func (r *slowRegistry) Status(string) registry.RefreshStatus { return r.status }

func TestListImagesAnswersFromTheCacheWhileARefreshRuns(t *testing.T) {
	app := platform.ID{Namespace: "default", Kind: "deployment", Name: "app"}
	cluster := &stubCluster{workloads: []platform.Workload{{ID: app, Containers: []platform.Container{{Name: "app", Image: "reg.example/app:1"}}}}}
	at := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	reg := &slowRegistry{release: make(chan struct{}), status: registry.RefreshStatus{RefreshedAt: at},
		cached: []registry.Image{{Repository: "reg.example/app", Tag: "1", CreatedAt: at}}}
	d := New(Config{ListWait: 50 * time.Millisecond}, Deps{Cluster: cluster, Releaser: stubReleaser{}, Images: reg}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()

	// The refresh hangs: the answer comes from the cache, in time, saying so.
	_, cis, err := d.ListImages(ctx, auth.Identity{}, "app")
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	if ci := cis[0]; !ci.Refresh.Refreshing || len(ci.Available) != 1 || ci.Available[0].Tag != "1" || ci.Err != nil {
		t.Errorf("while refreshing: %+v", ci)
	}
	// The refresh goes on in the background, shared: a second call joins
	// it, and once it ends the fresh list is answered.
	close(reg.release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, cis, _ = d.ListImages(ctx, auth.Identity{}, "app")
		if !cis[0].Refresh.Refreshing || time.Now().After(deadline) {
			break
		}
	}
	if ci := cis[0]; ci.Refresh.Refreshing || len(ci.Available) != 2 {
		t.Errorf("after the refresh: %+v", ci)
	}

	// A failing registry: the cached images, with the error.
	reg.err = errors.New("registry reg.example: 503 Service Unavailable")
	_, cis, _ = d.ListImages(ctx, auth.Identity{}, "app")
	if ci := cis[0]; ci.Refresh.LastError == "" || len(ci.Available) != 1 || ci.Err != nil {
		t.Errorf("after a failed refresh: %+v", ci)
	}
	// Nothing cached and failing: the error.
	reg.cached = nil
	_, cis, _ = d.ListImages(ctx, auth.Identity{}, "app")
	if ci := cis[0]; ci.Err == nil {
		t.Errorf("nothing cached, refresh failed: %+v", ci)
	}
}
