package release

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/syncer"
)

// imageCluster keeps the image each workload runs, whoever applied it
// last: a release, or the sync.
type imageCluster struct {
	recCluster
	mu     sync.Mutex
	images map[string]string // workload name → image
}

var imageRE = regexp.MustCompile(`image: (\S+)`)

func (c *imageCluster) Apply(_ context.Context, id platform.ID, m []byte) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.images[id.Name] = imageRE.FindStringSubmatch(string(m))[1]
	return 1, nil
}

// slowApplier is the sync's applier, held inside Apply until released.
type slowApplier struct {
	c       *imageCluster
	started chan struct{}
	release chan struct{}
}

func (a *slowApplier) Apply(_ context.Context, objs []platform.Object, _ platform.SyncOptions) ([]platform.ObjectResult, error) {
	close(a.started)
	<-a.release
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	var out []platform.ObjectResult
	for _, o := range objs {
		spec := o.Manifest["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		a.c.images[o.Ref().Name] = spec["containers"].([]any)[0].(map[string]any)["image"].(string)
		out = append(out, platform.ObjectResult{Ref: o.Ref(), Action: platform.ActionChanged})
	}
	return out, nil
}

// TestReleaseDuringASlowSyncWins: a release that starts while a sync is
// applying what it read before the release pushed ends with the
// release's image running, and the release's push kicks a sync.
func TestReleaseDuringASlowSyncWins(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "apps.yaml"), []byte(appsYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	images := memImages{"reg/web": {{Repository: "reg/web", Tag: "1.2", CreatedAt: t0.Add(time.Hour)}, {Repository: "reg/web", Tag: "1.0", CreatedAt: t0}}}
	cluster := &imageCluster{recCluster: recCluster{workloads: []platform.Workload{{ID: id("web")}}, applied: map[platform.ID]string{}}, images: map[string]string{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := NewEngine(&recRepo{dirRepo: dirRepo{dir}}, images, cluster, &recRecorder{}, log)
	applier := &slowApplier{c: cluster, started: make(chan struct{}), release: make(chan struct{})}
	s := syncer.New(syncer.Config{Interval: time.Hour}, e, applier, nil, log)
	var kicked []string
	var kmu sync.Mutex
	e.OnRevision(func(rev string) { kmu.Lock(); kicked = append(kicked, rev); kmu.Unlock(); s.Kick(rev) })

	synced := make(chan error, 1)
	go func() { _, err := s.Sync(context.Background(), false, false); synced <- err }()
	<-applier.started // the sync read reg/web:1.0 and is applying it

	released := make(chan error, 1)
	go func() {
		_, err := e.Execute(context.Background(), "default", Spec{Services: []platform.ID{id("web")}, Image: "reg/web:1.2", User: "dana"}, history.Release, ExecOptions{})
		released <- err
	}()
	// Give a release that does not wait for the sync the time to finish
	// first (what the test guards against); one that waits finishes after.
	select {
	case err := <-released:
		released <- err
	case <-time.After(time.Second):
	}
	close(applier.release)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	cluster.mu.Lock()
	got := cluster.images["web"]
	cluster.mu.Unlock()
	if got != "reg/web:1.2" {
		t.Errorf("web runs %s after the release, want reg/web:1.2 (the sync applied what it read before the push over the release)", got)
	}
	kmu.Lock()
	defer kmu.Unlock()
	if len(kicked) == 0 || kicked[len(kicked)-1] != "c0ffee" {
		t.Errorf("revisions told = %v, want the release's push c0ffee last (kicking a sync)", kicked)
	}
}
