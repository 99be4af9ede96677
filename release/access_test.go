package release

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// Two more workloads, running the same repository as "web": one in a
// namespace fluxd does not watch, one in a watched namespace where its
// credentials may not patch.
const otherNamespacesYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: unwatched
spec:
  template:
    spec:
      containers:
        - name: web
          image: reg/web:1.0
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ops
  namespace: readonly
spec:
  template:
    spec:
      containers:
        - name: web
          image: reg/web:1.0
`

// accessCluster is a cluster that watches only some namespaces and may
// patch in fewer, as platform/kube says with --namespaces and its access
// reviews.
type accessCluster struct {
	*recCluster
	mu        sync.Mutex
	watched   map[string]bool
	forbidden map[string]bool
	asked     []platform.ID // MayRelease calls
}

func (c *accessCluster) Watched(id platform.ID) error {
	if c.watched[id.Namespace] {
		return nil
	}
	return fluxerr.New(fluxerr.Precondition, fmt.Errorf("%w: %s is in namespace %s", platform.ErrNotWatched, id, id.Namespace), "add it to --namespaces")
}

func (c *accessCluster) MayRelease(_ context.Context, id platform.ID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = append(c.asked, id)
	if err := c.Watched(id); err != nil {
		return err
	}
	if c.forbidden[id.Namespace] {
		return fluxerr.New(fluxerr.Precondition, fmt.Errorf("%w: may not patch deployments in namespace %s", platform.ErrForbidden, id.Namespace), "create the RoleBinding fluxd-workloads-fluxd in "+id.Namespace)
	}
	return nil
}

func newAccessEngine(t *testing.T) (*Engine, *recRepo, *accessCluster) {
	t.Helper()
	e, repo, rc, _ := newTestEngine(t)
	if err := os.WriteFile(filepath.Join(repo.dir, "others.yaml"), []byte(otherNamespacesYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	ac := &accessCluster{recCluster: rc, watched: map[string]bool{"default": true, "readonly": true}, forbidden: map[string]bool{"readonly": true}}
	e.cluster = ac
	return e, repo, ac
}

func unwatchedID() platform.ID {
	return platform.ID{Namespace: "unwatched", Kind: "deployment", Name: "api"}
}

func readonlyID() platform.ID {
	return platform.ID{Namespace: "readonly", Kind: "deployment", Name: "ops"}
}

// A service outside --namespaces, named on its own, is refused before
// anything is read or committed, and the error says what to do; with
// every service it is listed as not watched and left alone.
func TestPlanRefusesUnwatched(t *testing.T) {
	ctx := context.Background()
	e, repo, ac := newAccessEngine(t)
	for _, spec := range []Spec{
		{Services: []platform.ID{unwatchedID()}, Image: "reg/web:1.2"},
		{Services: []platform.ID{unwatchedID()}, AllLatest: true},
	} {
		_, err := e.Plan(ctx, spec)
		if !errors.Is(err, platform.ErrNotWatched) || fluxerr.KindOf(err) != fluxerr.Precondition || !strings.Contains(err.Error(), "--namespaces") {
			t.Errorf("plan of %v: %v; want a precondition error wrapping ErrNotWatched that says how to watch it", spec, err)
		}
		res, err := e.Execute(ctx, "team-a", spec, history.Release, ExecOptions{})
		if err == nil || repo.files != nil || len(ac.applied) > 0 {
			t.Errorf("execution of %v: %v, committed %v, applied %v; want it refused with nothing committed or applied", spec, res, repo.files, ac.applied)
		}
	}
	for _, spec := range []Spec{{All: true, AllLatest: true}, {All: true, Image: "reg/web:1.2"}} {
		p, err := e.Plan(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, it := range p.Items {
			if it.Service == unwatchedID() {
				found = true
				if it.Action != Skip || !strings.HasPrefix(it.Reason, ReasonNotWatched+":") || !Refused(it) {
					t.Errorf("plan of %v: %s is %s (%s); want it skipped as not watched", spec, it.Service, it.Action, it.Reason)
				}
			}
		}
		if !found {
			t.Errorf("plan of %v does not list %s as not watched", spec, unwatchedID())
		}
	}
	res, err := e.Execute(ctx, "team-a", Spec{All: true, Image: "reg/web:1.2", User: "dana"}, history.Release, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(repo.files["others.yaml"]), "reg/web:1.2") {
		t.Errorf("release --all committed the unwatched workload:\n%s", repo.files["others.yaml"])
	}
	if _, ok := ac.applied[unwatchedID()]; ok {
		t.Errorf("release --all applied the unwatched workload")
	}
	if _, ok := ac.applied[id("web")]; !ok || res.Commit == "" {
		t.Errorf("release --all did not release the watched workload web: %+v, applied %v", res, ac.applied)
	}
}

// A service fluxd may not patch is refused at the plan, named on its
// own, and skipped in a release of all; a permission taken away between
// the plan and the execution is found before the commit.
func TestPlanRefusesForbidden(t *testing.T) {
	ctx := context.Background()
	e, repo, ac := newAccessEngine(t)
	spec := Spec{Services: []platform.ID{readonlyID()}, Image: "reg/web:1.2", User: "dana"}
	_, err := e.Plan(ctx, spec)
	if !errors.Is(err, platform.ErrForbidden) || !strings.Contains(err.Error(), "RoleBinding") || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("plan of a service fluxd may not patch: %v; want it refused naming the namespace and the binding", err)
	}
	if _, err := e.Execute(ctx, "team-a", spec, history.Release, ExecOptions{}); !errors.Is(err, platform.ErrForbidden) || repo.files != nil || len(ac.applied) > 0 {
		t.Errorf("execution: %v, committed %v, applied %v; want it refused with nothing committed", err, repo.files, ac.applied)
	}

	p, err := e.Plan(ctx, Spec{All: true, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range p.Items {
		if it.Service == readonlyID() && (!Refused(it) || !strings.HasPrefix(it.Reason, ReasonForbidden+":")) {
			t.Errorf("release --all: %s is %s (%s); want it skipped as not permitted", it.Service, it.Action, it.Reason)
		}
	}

	// Permitted when planned, forbidden when the job runs.
	ac.forbidden = map[string]bool{}
	p, err = e.Plan(ctx, spec)
	if err != nil || p.Updates() != 1 {
		t.Fatalf("plan once permitted: %v, %+v", err, p)
	}
	ac.forbidden = map[string]bool{"readonly": true}
	if _, err := e.Execute(ctx, "team-a", spec, history.Release, ExecOptions{Checksum: p.Checksum}); !errors.Is(err, platform.ErrForbidden) || repo.files != nil {
		t.Errorf("execution after the permission went: %v, committed %v; want it refused before the commit", err, repo.files)
	}
}
