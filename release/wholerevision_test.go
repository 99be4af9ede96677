package release

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/platform"
)

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
