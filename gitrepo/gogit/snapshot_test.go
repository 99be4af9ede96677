package gogit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// seed is the test's seed: FLUXD_SEED to replay a run, else a fresh one.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("FLUXD_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FLUXD_SEED=%q: %v", v, err)
		}
		s = n
	}
	t.Logf("seed %d (replay with FLUXD_SEED=%d)", s, s)
	return s
}

// revision is what a person's commit holds: services svc-0 … svc-(n-1),
// each file naming the commit's number.
type revision struct{ number, services int }

// Every read of git sees one whole revision, while fetches and resets run
// at the same time: people push commits that add and remove services,
// one goroutine fetches each (Sync resets the working tree to it), and
// readers read snapshots of revisions at random, checking that every file
// belongs to the revision and that none is missing or left over.
func TestSnapshotsAreWholeRevisionsWhileFetching(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 0))
	url, bare := newRemote(t)
	r := open(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	work := filepath.Join(t.TempDir(), "person")
	gitCLI(t, "", "clone", "-q", "-b", "prod", bare, work)
	var mu sync.Mutex
	revs := map[string]revision{}
	var order []string
	const commits = 25
	plans := make([]int, commits)
	for i := range plans {
		plans[i] = 1 + rng.IntN(15)
	}
	readerSeeds := []uint64{rng.Uint64(), rng.Uint64(), rng.Uint64()}

	written := make(chan struct{})
	go func() {
		defer close(written)
		for i, n := range plans {
			dir := filepath.Join(work, "deploy")
			old, _ := filepath.Glob(filepath.Join(dir, "svc-*.yaml"))
			for _, f := range old {
				os.Remove(f)
			}
			for j := 0; j < n; j++ {
				body := fmt.Sprintf("kind: Deployment\nmetadata:\n  name: svc-%d\n# commit %d\n%s", j, i, strings.Repeat("# padding\n", 50))
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("svc-%d.yaml", j)), []byte(body), 0o644); err != nil {
					t.Error(err)
					return
				}
			}
			gitCLI(t, work, "add", "-A", ".")
			gitCLI(t, work, "commit", "-q", "-m", fmt.Sprintf("commit %d", i))
			gitCLI(t, work, "push", "-q", "origin", "prod")
			rev, err := r.Sync(ctx) // fetch and reset, while readers read
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			revs[rev] = revision{i, n}
			order = append(order, rev)
			mu.Unlock()
		}
	}()

	var wg sync.WaitGroup
	var reads sync.Map
	for k, s := range readerSeeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(s, uint64(k)))
			n := 0
			for {
				select {
				case <-written:
					reads.Store(k, n)
					return
				default:
				}
				mu.Lock()
				if len(order) == 0 {
					mu.Unlock()
					time.Sleep(time.Millisecond)
					continue
				}
				// Mostly the newest revisions, sometimes an old one.
				i := len(order) - 1 - rng.IntN(min(len(order), 4))
				rev := order[i]
				want := revs[rev]
				mu.Unlock()
				dir, done, err := r.Snapshot(ctx, rev)
				if err != nil {
					t.Error(err)
					return
				}
				if err := checkRevision(filepath.Join(dir, "deploy"), want); err != nil {
					ents, derr := os.ReadDir(dir)
					t.Errorf("reading revision %.12s (commit %d): %v (dir %s: %d entries, %v)", rev, want.number, err, dir, len(ents), derr)
				}
				done()
				n++
				time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
			}
		}()
	}
	wg.Wait()
	<-written
	total := 0
	reads.Range(func(_, v any) bool { total += v.(int); return true })
	if total == 0 {
		t.Fatal("no reads ran while the commits were fetched")
	}
	t.Logf("%d commits fetched, %d snapshot reads checked", commits, total)
	// Old snapshots are removed once nobody holds them.
	entries, _ := os.ReadDir(r.snapshotRoot())
	if len(entries) > keepSnapshots {
		t.Errorf("%d snapshots are left; want at most %d", len(entries), keepSnapshots)
	}
}

// checkRevision checks that dir holds exactly the services of want, all
// from its commit.
func checkRevision(dir string, want revision) error {
	files, err := filepath.Glob(filepath.Join(dir, "svc-*.yaml"))
	if err != nil {
		return err
	}
	if len(files) != want.services {
		return fmt.Errorf("%d services; want %d", len(files), want.services)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), fmt.Sprintf("# commit %d\n", want.number)) {
			return fmt.Errorf("%s is from another commit:\n%.80s", filepath.Base(f), b)
		}
	}
	return nil
}

// A tree holding two entries of one name, a symbolic link "deploy" to a
// directory outside and a directory "deploy", is not written through
// the link: the snapshot fails, and nothing lands outside it.
func TestSnapshotNeverWritesThroughALinkOfADuplicateName(t *testing.T) {
	url, bare := newRemote(t)
	r := open(t, url)
	ctx := context.Background()
	if _, err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	work := filepath.Join(t.TempDir(), "evil")
	gitCLI(t, "", "clone", "-q", "-b", "prod", bare, work)
	hashOf := func(body string) string {
		p := filepath.Join(t.TempDir(), "blob")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return gitCLI(t, work, "hash-object", "-w", p)
	}
	file := hashOf("kind: Deployment\n")
	link := hashOf(outside)
	sub := gitCLIStdin(t, work, "100644 blob "+file+"\tevil.yaml\n", "mktree")
	top := gitCLIStdin(t, work, "120000 blob "+link+"\tdeploy\n040000 tree "+sub+"\tdeploy\n", "mktree")
	commit := gitCLI(t, work, "commit-tree", top, "-m", "two entries named deploy")
	gitCLI(t, work, "push", "-q", "-f", "origin", commit+":refs/heads/prod")

	// The working clone's reset refuses such a tree; its objects are
	// fetched, and a snapshot of it is what is asked for here.
	if _, err := r.Sync(ctx); err != nil {
		t.Logf("Sync: %v", err)
	}
	_, done, err := r.Snapshot(ctx, commit)
	if err == nil {
		done()
	}
	if _, serr := os.Stat(filepath.Join(outside, "evil.yaml")); serr == nil {
		t.Fatalf("the snapshot wrote evil.yaml through the link, outside it (err %v)", err)
	}
	if err == nil || !strings.Contains(err.Error(), "deploy") {
		t.Errorf("a tree with two entries named deploy: err = %v, want a refusal naming it", err)
	}
}

// gitCLIStdin runs git with stdin.
func gitCLIStdin(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
