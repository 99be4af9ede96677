package syncer

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// dirClone is a clone that is a plain directory.
type dirClone struct {
	root, rev string
	reads     int
}

func (c *dirClone) Exclusive(_ context.Context, fn func() error) error { return fn() }

func (c *dirClone) Read(_ context.Context, _, _ bool, fn func(rev, root string, paths []string) error) error {
	c.reads++
	return fn(c.rev, c.root, []string{"."})
}

// scriptedApplier answers each object with the action its name asks for
// ("created-x", "failed-y"), recording what it was given.
type scriptedApplier struct {
	got  []platform.Object
	opts platform.SyncOptions
}

func (a *scriptedApplier) Apply(_ context.Context, objs []platform.Object, opts platform.SyncOptions) ([]platform.ObjectResult, error) {
	a.got, a.opts = objs, opts
	var out []platform.ObjectResult
	for _, o := range objs {
		action, _, _ := strings.Cut(o.Ref().Name, "-")
		r := platform.ObjectResult{Ref: o.Ref(), Where: o.Where(), Action: action}
		if action == platform.ActionFailed {
			r.Error = "refused"
		}
		out = append(out, r)
	}
	return out, nil
}

type memRecorder struct{ evs []history.Event }

func (m *memRecorder) Record(_ context.Context, ev history.Event) (int64, error) {
	m.evs = append(m.evs, ev)
	return int64(len(m.evs)), nil
}

func TestSyncRecordsChangesAndEachNewFailureOnce(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: ns\n"
	}
	write("a.yaml", cm("created-a")+"---\n"+"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: unchanged-web, namespace: ns}\n")
	clone := &dirClone{root: root, rev: "0123456789abcdef"}
	app := &scriptedApplier{}
	rec := &memRecorder{}
	s := New(Config{Interval: time.Minute, Prune: true}, clone, app, rec, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()

	rep, err := s.Sync(ctx, false, false)
	if err != nil || rep.Failed() || len(rec.evs) != 1 {
		t.Fatalf("first sync: %+v, %v; %d events", rep, err, len(rec.evs))
	}
	ev := rec.evs[0]
	if ev.Type != history.Sync || ev.Instance != history.SyncInstance || ev.Commit != clone.rev || !strings.Contains(ev.Message, "1 created") || !strings.Contains(ev.Message, "created ConfigMap/ns/created-a") {
		t.Errorf("event = %+v", ev)
	}
	if !app.opts.Prune || app.opts.NoPrune != "" {
		t.Errorf("prune options = %+v, want pruning", app.opts)
	}

	// Nothing changed: nothing recorded.
	write("a.yaml", cm("unchanged-a"))
	if _, err := s.Sync(ctx, false, false); err != nil || len(rec.evs) != 1 {
		t.Fatalf("an unchanged sync recorded an event: %v %d", err, len(rec.evs))
	}

	// A failure and an unreadable file: recorded once with file and line,
	// pruning held back, then not again while it stays the same.
	write("b.yaml", "\n"+cm("failed-b"))
	write("c.yaml", "kind: [\n")
	for i := 0; i < 2; i++ {
		rep, err = s.Sync(ctx, false, false)
		if err != nil || !rep.Failed() {
			t.Fatalf("sync %d: %+v %v", i, rep, err)
		}
	}
	if len(rec.evs) != 2 {
		t.Fatalf("%d events, want the failure recorded once", len(rec.evs))
	}
	if e := rec.evs[1].Error; !strings.Contains(e, "b.yaml:2: ConfigMap/ns/failed-b: refused") || !strings.Contains(e, "c.yaml:") {
		t.Errorf("the failure event's error = %q", e)
	}
	if app.opts.NoPrune == "" {
		t.Error("pruning was not held back though a file could not be read")
	}
	if s.Last() != rep {
		t.Error("Last is not the last sync")
	}

	// A dry run records nothing and is not the last sync.
	if _, err := s.Sync(ctx, false, true); err != nil || len(rec.evs) != 2 || s.Last() != rep || !app.opts.DryRun {
		t.Errorf("a dry run: %v, %d events", err, len(rec.evs))
	}
}

// contendedClone is a clone where a release waits to apply while
// waiting is set; Exclusive counts its callers, as the engine's lock would
// pass to the waiting release between them.
type contendedClone struct {
	dirClone
	waiting    bool
	exclusives int
}

func (c *contendedClone) DeployWaiting() bool { return c.waiting }

func (c *contendedClone) Exclusive(_ context.Context, fn func() error) error {
	c.exclusives++
	return fn()
}

// yieldingApplier yields, once, when asked to and a release waits.
type yieldingApplier struct {
	clone *contendedClone
	calls int
}

func (a *yieldingApplier) Apply(_ context.Context, objs []platform.Object, opts platform.SyncOptions) ([]platform.ObjectResult, error) {
	a.calls++
	if opts.Yield != nil && opts.Yield() {
		a.clone.waiting = false // the release goes, then the sync again
		return []platform.ObjectResult{{Ref: objs[0].Ref(), Action: platform.ActionSkipped}}, platform.ErrPreempted
	}
	return []platform.ObjectResult{{Ref: objs[0].Ref(), Action: platform.ActionCreated}}, nil
}

// TestSyncYieldsToAReleaseAndSyncsAgain: a sync asked to stop for a
// release leaves the apply lock, then syncs again from git; the stop is
// neither a failure nor recorded, only the sync that ran to its end is.
func TestSyncYieldsToAReleaseAndSyncsAgain(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clone := &contendedClone{dirClone: dirClone{root: root, rev: "0123456789abcdef"}, waiting: true}
	app := &yieldingApplier{clone: clone}
	rec := &memRecorder{}
	s := New(Config{Interval: time.Minute}, clone, app, rec, slog.New(slog.NewTextHandler(io.Discard, nil)))
	rep, err := s.Sync(context.Background(), false, false)
	if err != nil || rep.Failed() || rep.Count(platform.ActionCreated) != 1 {
		t.Fatalf("sync = %+v, %v; want the second run's report, created", rep, err)
	}
	if app.calls != 2 || clone.exclusives != 2 || clone.reads != 2 {
		t.Errorf("%d applies, %d exclusive sections, %d reads of git; want 2 of each (git read again after the release)", app.calls, clone.exclusives, clone.reads)
	}
	if len(rec.evs) != 1 {
		t.Errorf("%d history events, want 1 (the stop is not recorded)", len(rec.evs))
	}
}

// A promotion Pipeline (fluxd.io/v1) in git is fluxd's own configuration:
// the sync never hands it to the cluster, whose API server has no such
// kind and would fail every sync on it.
func TestSyncLeavesFluxdConfigurationOut(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pipeline := "apiVersion: fluxd.io/v1\nkind: Pipeline\nmetadata: {name: web, namespace: team}\nspec:\n  stages:\n  - name: dev\n    services: [team:deployment/web]\n"
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: created-a, namespace: ns}\n"
	if err := os.WriteFile(filepath.Join(root, "a.yaml"), []byte(pipeline+"---\n"+cm), 0o644); err != nil {
		t.Fatal(err)
	}
	app := &scriptedApplier{}
	s := New(Config{Interval: time.Minute}, &dirClone{root: root, rev: "0123456789abcdef"}, app, &memRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := s.Sync(context.Background(), false, false); err != nil {
		t.Fatal(err)
	}
	if len(app.got) != 1 || app.got[0].Ref().Kind != "ConfigMap" {
		t.Errorf("the sync applied %v; want the ConfigMap alone", app.got)
	}
}
