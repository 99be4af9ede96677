package release

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// overlapImages answers tag lists, counting each repository's reads and
// the most in flight at once. A read waits for a second one to start (or
// for every read to have started), so reads made one after the other
// show as at most one in flight, whatever the machine's speed.
type overlapImages struct {
	memImages
	mu       sync.Mutex
	cond     *sync.Cond
	inFlight int
	most     int
	started  int
	total    int // reads the plan is expected to start
	reads    map[string]int
	gaveUp   bool // a read waited long for a second one: no one waits again
}

func (o *overlapImages) Tags(ctx context.Context, repo string) ([]string, error) {
	o.mu.Lock()
	o.reads[repo]++
	o.started++
	o.inFlight++
	o.most = max(o.most, o.inFlight)
	o.cond.Broadcast()
	if !o.gaveUp && o.inFlight < 2 && o.started < o.total {
		// Wait for a second read, up to a while: reads made one after
		// the other never see one, and after the first wait nobody
		// waits again (the count then fails the test, not the clock).
		timer := time.AfterFunc(10*time.Second, func() {
			o.mu.Lock()
			o.gaveUp = true
			o.cond.Broadcast()
			o.mu.Unlock()
		})
		for !o.gaveUp && o.inFlight < 2 && o.started < o.total {
			o.cond.Wait()
		}
		timer.Stop()
	}
	o.inFlight--
	o.mu.Unlock()
	return o.memImages.Tags(ctx, repo)
}

// A plan of the newest images over many repositories reads their tag
// lists side by side before it decides (the automator's first pass at
// 10,000 workloads read 1,000 lists one after the other), each
// repository once, and decides as it did reading them one by one.
func TestPlanReadsTagListsSideBySide(t *testing.T) {
	const repos = 20
	dir := t.TempDir()
	imgs := memImages{}
	var services []platform.ID
	for i := range repos * 2 { // two workloads per repository
		repo := fmt.Sprintf("reg/app-%d", i%repos)
		imgs[repo] = []registry.Image{{Repository: repo, Tag: "1.0.0"}, {Repository: repo, Tag: "1.1.0"}}
		name := fmt.Sprintf("w-%d", i)
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(deployment(name, repo+":1.0.0", "fluxd.io/tag-all", "semver:^1")), 0o644); err != nil {
			t.Fatal(err)
		}
		services = append(services, id(name))
	}
	images := &overlapImages{memImages: imgs, total: repos, reads: map[string]int{}}
	images.cond = sync.NewCond(&images.mu)
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	plan, err := e.Plan(context.Background(), Spec{Services: services, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	if images.most < 2 {
		t.Errorf("at most %d tag list read in flight at once; want them side by side", images.most)
	}
	for repo, n := range images.reads {
		if n != 1 {
			t.Errorf("%s's tag list read %d times, want once", repo, n)
		}
	}
	if len(images.reads) != repos {
		t.Errorf("%d repositories read, want %d", len(images.reads), repos)
	}
	updates := 0
	for _, it := range plan.Items {
		for _, u := range it.Updates {
			if strings.HasSuffix(u.Target, ":1.1.0") {
				updates++
			}
		}
	}
	if updates != repos*2 {
		t.Errorf("%d workloads planned to 1.1.0, want %d:\n%s", updates, repos*2, strings.Join(flatten(plan), "\n"))
	}
}

// reposRead records the repositories whose tag lists a plan read.
type reposRead struct {
	memImages
	mu   sync.Mutex
	read map[string]bool
}

func (r *reposRead) Tags(ctx context.Context, repo string) ([]string, error) {
	r.mu.Lock()
	r.read[repo] = true
	r.mu.Unlock()
	return r.memImages.Tags(ctx, repo)
}

// The read-ahead of a plan of the newest images reads only what the plan
// would: a scoped caller's dry run contacts no registry of another
// team's workloads, nor of a locked or excluded workload's.
func TestPlanReadsAheadOnlyTheCallersRepositories(t *testing.T) {
	dir := t.TempDir()
	imgs := memImages{}
	for _, w := range []struct{ ns, name, ann string }{
		{"team-a", "web", ""}, {"team-a", "api", ""}, {"team-a", "held", "    fluxd.io/locked: \"true\"\n"},
		{"team-a", "skipped", ""}, {"team-b", "secret", ""}, {"team-b", "db", ""},
	} {
		repo := "reg-" + w.ns + ".example/" + w.name
		imgs[repo] = []registry.Image{{Repository: repo, Tag: "1.0.0"}, {Repository: repo, Tag: "1.1.0"}}
		y := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + w.name + "\n  namespace: " + w.ns + "\n  annotations:\n" +
			"    fluxd.io/tag-all: \"semver:^1\"\n" + w.ann +
			"spec:\n  template:\n    spec:\n      containers:\n        - name: app\n          image: " + repo + ":1.0.0\n"
		if err := os.WriteFile(filepath.Join(dir, w.ns+"-"+w.name+".yaml"), []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	images := &reposRead{memImages: imgs, read: map[string]bool{}}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	skipped := platform.ID{Namespace: "team-a", Kind: "deployment", Name: "skipped"}
	if _, err := e.Plan(context.Background(), Spec{All: true, AllLatest: true, Exclude: []platform.ID{skipped},
		Scope: &auth.Scope{Namespaces: []string{"team-a"}}}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for r := range images.read {
		got = append(got, r)
	}
	sort.Strings(got)
	if want := "reg-team-a.example/api reg-team-a.example/web"; strings.Join(got, " ") != want {
		t.Errorf("a plan scoped to team-a read the tag lists of %v; want %s", got, want)
	}
}

// Nor does it read the tags of a container the plan reads none for: an
// image pinned by digest that fluxd is not asked to move.
func TestPlanReadsAheadNoTagsOfAnImagePinnedByDigest(t *testing.T) {
	dir := t.TempDir()
	imgs := memImages{}
	for _, name := range []string{"web", "api", "pinned"} {
		repo := "reg.example/" + name
		imgs[repo] = []registry.Image{{Repository: repo, Tag: "1.0.0"}, {Repository: repo, Tag: "1.1.0"}}
		image := repo + ":1.0.0"
		if name == "pinned" {
			image += "@sha256:" + strings.Repeat("ab", 32)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(deployment(name, image, "fluxd.io/tag-all", "semver:^1")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	images := &reposRead{memImages: imgs, read: map[string]bool{}}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	plan, err := e.Plan(context.Background(), Spec{All: true, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	if images.read["reg.example/pinned"] {
		t.Errorf("the plan read the tag list of an image pinned by digest, which it does not move:\n%s", strings.Join(flatten(plan), "\n"))
	}
	if !images.read["reg.example/web"] || !images.read["reg.example/api"] {
		t.Errorf("the plan read %v; want web's and api's lists", images.read)
	}
}
