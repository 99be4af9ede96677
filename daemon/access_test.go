package daemon

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// accessCluster watches one namespace and may patch only in it.
type accessCluster struct{ stubCluster }

func (c *accessCluster) Watched(id platform.ID) error {
	if id.Namespace == "watched" || id.Namespace == "readonly" {
		return nil
	}
	return fmt.Errorf("%w: %s is in namespace %s", platform.ErrNotWatched, id, id.Namespace)
}

func (c *accessCluster) MayRelease(_ context.Context, id platform.ID) error {
	if err := c.Watched(id); err != nil {
		return err
	}
	if id.Namespace == "readonly" {
		return fmt.Errorf("%w: may not patch deployments in namespace readonly", platform.ErrForbidden)
	}
	return nil
}

// list-services marks the services in git that fluxd will not release:
// outside --namespaces ("not watched", not "not in cluster", which it
// cannot tell), and where it may not patch (a warning, its rollout
// status kept).
func TestListServicesMarksUnreleasable(t *testing.T) {
	ids := map[string]platform.ID{}
	m := &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}
	for _, ns := range []string{"watched", "readonly", "elsewhere"} {
		id := platform.ID{Namespace: ns, Kind: "deployment", Name: "web"}
		ids[ns] = id
		m.Workloads[id] = &gitrepo.Definition{ID: id, File: ns + ".yaml", Annotations: map[string]string{}}
	}
	cluster := &accessCluster{stubCluster{workloads: []platform.Workload{
		{ID: ids["watched"], Status: "ready"}, {ID: ids["readonly"], Status: "ready"}}}}
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: manifestReleaser{m: m}, Jobs: stubJobs{}})
	resp, err := f.client.ListServices(withToken(f.tokens[auth.Viewer]), &fluxdv1.ListServicesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*fluxdv1.Service{}
	for _, s := range resp.GetServices() {
		got[s.GetId()] = s
	}
	if s := got[ids["watched"].String()]; s.GetStatus() != "ready" || len(s.GetWarnings()) > 0 {
		t.Errorf("watched and permitted: %v", s)
	}
	if s := got[ids["readonly"].String()]; s.GetStatus() != "ready" || len(s.GetWarnings()) != 1 || !strings.HasPrefix(s.GetWarnings()[0], "not permitted: ") {
		t.Errorf("watched, not permitted: %v; want its status kept and a warning 'not permitted: …'", s)
	}
	if s := got[ids["elsewhere"].String()]; s.GetStatus() != StatusNotWatched || len(s.GetWarnings()) != 1 || !strings.Contains(s.GetWarnings()[0], "namespace elsewhere") {
		t.Errorf("outside --namespaces: %v; want status %q and a warning naming the namespace", s, StatusNotWatched)
	}
}
