package release

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// snapDirRepo is dirRepo whose revision the test sets, read as a
// snapshot (as gogit.Repo is): a revision's files never change.
type snapDirRepo struct {
	dirRepo
	rev   string
	paths []string
	reads int
}

func (r *snapDirRepo) Sync(context.Context) (string, error) { return r.rev, nil }
func (r *snapDirRepo) Paths() []string                      { return r.paths }
func (r *snapDirRepo) Snapshot(context.Context, string) (string, func(), error) {
	r.reads++
	return r.dir, func() {}, nil
}

// The definitions of one revision are parsed once: the automator's
// pass, its plan and a dry run of the same revision share them. A new
// revision, or other paths, are read again.
func TestOneRevisionIsParsedOnce(t *testing.T) {
	dir, images := writeBenchRepo(t)
	repo := &snapDirRepo{dirRepo: dirRepo{dir}, rev: "rev-1", paths: []string{"."}}
	e := NewEngine(repo, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	_, m1, err := e.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Plan(ctx, Spec{All: true, AllLatest: true, User: "t"}); err != nil {
		t.Fatal(err)
	}
	_, m2, err := e.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m1 != m2 || repo.reads != 1 {
		t.Errorf("the same revision was parsed again (%d reads of its snapshot; same copy: %v)", repo.reads, m1 == m2)
	}
	repo.rev = "rev-2"
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(fmt.Sprintf(benchDoc, 0, 0, 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, m3, err := e.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m3 == m1 || len(m3.Workloads) != 801 {
		t.Errorf("a new revision gave %d workloads (same copy: %v); want 801 read afresh", len(m3.Workloads), m3 == m1)
	}
	repo.paths = []string{"team-1"}
	_, m4, err := e.Manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m4 == m3 || len(m4.Workloads) == 0 {
		t.Fatalf("other paths at the same revision gave the same copy (%v) or nothing (%d workloads)", m4 == m3, len(m4.Workloads))
	}
	for id, def := range m4.Workloads {
		if !strings.HasPrefix(def.File, "team-1/") {
			t.Errorf("other paths at the same revision gave %s from %s, outside team-1", id, def.File)
		}
	}
}

// Workloads that share a repository share its ranking only under the
// same policy: another bound tag, order or pre-release setting ranks
// again, and gets its own answer.
func TestSharedRankingKeepsEachPolicysAnswer(t *testing.T) {
	dir := t.TempDir()
	doc := func(name, image string, ann map[string]string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\n  namespace: default\n  annotations:\n", name)
		for k, v := range ann {
			fmt.Fprintf(&b, "    %s: %q\n", k, v)
		}
		fmt.Fprintf(&b, "spec:\n  template:\n    spec:\n      containers:\n        - name: app\n          image: %s\n", image)
		return b.String()
	}
	files := doc("patch-1", "reg.example/app:1.1.0", map[string]string{AnnotationTagAll: "semver:patch"}) +
		doc("patch-2", "reg.example/app:1.2.0", map[string]string{AnnotationTagAll: "semver:patch"}) +
		doc("alpha", "reg.example/app:1.1.0", map[string]string{AnnotationTagAll: "glob:1.*", AnnotationTagOrder: "alphabetical"}) +
		doc("numeric", "reg.example/num:1", map[string]string{AnnotationTagAll: "glob:*", AnnotationTagOrder: "numerical"}) +
		doc("alpha-num", "reg.example/num:1", map[string]string{AnnotationTagAll: "glob:*", AnnotationTagOrder: "alphabetical"}) +
		doc("plain", "reg.example/app:1.1.0", map[string]string{AnnotationTagAll: "semver:^1"}) +
		doc("pre", "reg.example/app:1.1.0", map[string]string{AnnotationTagAll: "semver:^1", AnnotationTagPrerelease: "true"})
	if err := os.WriteFile(filepath.Join(dir, "all.yaml"), []byte(files), 0o644); err != nil {
		t.Fatal(err)
	}
	images := memImages{}
	for _, tag := range []string{"1.1.0", "1.1.5", "1.2.0", "1.2.7", "1.9.0", "1.10.0", "1.11.0-rc.1"} {
		images["reg.example/app"] = append(images["reg.example/app"], registry.Image{Repository: "reg.example/app", Tag: tag})
	}
	for _, tag := range []string{"1", "9", "10"} {
		images["reg.example/num"] = append(images["reg.example/num"], registry.Image{Repository: "reg.example/num", Tag: tag})
	}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p, err := e.Plan(context.Background(), Spec{All: true, AllLatest: true, User: "t"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"patch-1":   "reg.example/app:1.1.5",
		"patch-2":   "reg.example/app:1.2.7",
		"alpha":     "reg.example/app:1.9.0",
		"numeric":   "reg.example/num:10",
		"alpha-num": "reg.example/num:9",
		"plain":     "reg.example/app:1.10.0",
		"pre":       "reg.example/app:1.11.0-rc.1",
	}
	for _, it := range p.Items {
		got := ""
		if len(it.Updates) == 1 {
			got = it.Updates[0].Target
		}
		if w := want[it.Service.Name]; got != w {
			t.Errorf("%s: released to %q (%s); want %s", it.Service, got, it.Reason, w)
		}
		delete(want, it.Service.Name)
	}
	if len(want) != 0 {
		t.Errorf("not planned: %v", want)
	}
}

// Plans and listings see one whole revision while fetches run: people
// push commits that add and remove services (each commit's services all
// run reg/web:N, N its number), fetches reset the clone's working tree to
// each (some through the engine, some straight on the clone, as any
// other reader of the clone might), and listings and plans check that
// what they read is exactly one commit's services. Seeded; replay with
// FLUXD_SEED=N.
func TestReadsSeeWholeRevisionsWhileFetching(t *testing.T) {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("FLUXD_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		s = n
	}
	t.Logf("seed %d (replay with FLUXD_SEED=%d)", s, s)
	rng := rand.New(rand.NewPCG(s, 0))
	g := newRealGit(t, map[string]string{"svc-0.yaml": deployment("svc-0", "reg/web:0")})
	counts := map[int]int{0: 1}
	const commits = 15
	for i := 1; i <= commits; i++ {
		counts[i] = 1 + rng.IntN(40)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	work := filepath.Join(t.TempDir(), "person")
	gitCLI(t, "", "clone", "-q", "-b", "main", g.bare, work)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= commits; i++ {
			old, _ := filepath.Glob(filepath.Join(work, "svc-*.yaml"))
			for _, f := range old {
				os.Remove(f)
			}
			for j := 0; j < counts[i]; j++ {
				name := fmt.Sprintf("svc-%d", j)
				if err := os.WriteFile(filepath.Join(work, name+".yaml"), []byte(deployment(name, fmt.Sprintf("reg/web:%d", i))), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
			gitCLI(t, work, "add", "-A", ".")
			gitCLI(t, work, "commit", "-q", "-m", fmt.Sprintf("commit %d", i))
			gitCLI(t, work, "push", "-q", "origin", "main")
			if _, err := g.repo.Sync(ctx); err != nil { // straight on the clone
				t.Error(err)
				return
			}
		}
	}()
	check := func(what string, ws map[platform.ID]string) {
		tags := map[string]bool{}
		for _, img := range ws {
			tags[strings.TrimPrefix(img, "reg/web:")] = true
		}
		if len(tags) != 1 {
			t.Errorf("%s read services of several commits at once: %v", what, ws)
			return
		}
		for tag := range tags {
			n, _ := strconv.Atoi(tag)
			if len(ws) != counts[n] {
				t.Errorf("%s read %d services of commit %d; it has %d", what, len(ws), n, counts[n])
			}
		}
	}
	var wg sync.WaitGroup
	reads := 0
	var mu sync.Mutex
	for k := 0; k < 3; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				ws := map[platform.ID]string{}
				if k == 0 {
					p, err := g.e.Plan(ctx, Spec{All: true, Image: "reg/web:1.2"})
					if err != nil {
						t.Error(err)
						return
					}
					for _, it := range p.Items {
						for _, u := range it.Updates {
							ws[it.Service] = u.Current
						}
					}
					check("a plan", ws)
				} else {
					_, m, err := g.e.Manifests(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					for id, def := range m.Workloads {
						ws[id] = def.Containers[0].Image
					}
					check("a listing", ws)
				}
				mu.Lock()
				reads++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d commits fetched, %d reads checked", commits, reads)
}
