package gogit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSnapshot measures what a new revision costs readers: a
// snapshot of a repository of 1,000 manifests, written whole (the first)
// or after a commit that changed one file (the rest hard-linked).
func BenchmarkSnapshot(b *testing.B) {
	url, bare := newRemote(b)
	work := filepath.Join(b.TempDir(), "person")
	gitCLI(b, "", "clone", "-q", "-b", "prod", bare, work)
	for i := 0; i < 1000; i++ {
		body := fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc-%d\nspec:\n  template:\n    spec:\n      containers:\n        - name: app\n          image: reg/app:1.0.%d\n", i, i)
		if err := os.WriteFile(filepath.Join(work, "deploy", fmt.Sprintf("svc-%d.yaml", i)), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gitCLI(b, work, "add", "-A", ".")
	gitCLI(b, work, "commit", "-q", "-m", "1000 services")
	gitCLI(b, work, "push", "-q", "origin", "prod")
	r := open(b, url)
	ctx := context.Background()
	// Revisions, each changing one file: run with -benchtime 50x or less.
	const n = 60
	revs := make([]string, 0, n+1)
	for i := 0; i <= n; i++ {
		if err := os.WriteFile(filepath.Join(work, "deploy", "svc-0.yaml"), []byte(fmt.Sprintf("# %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
		gitCLI(b, work, "commit", "-q", "-am", fmt.Sprint(i))
		revs = append(revs, gitCLI(b, work, "rev-parse", "HEAD"))
	}
	gitCLI(b, work, "push", "-q", "origin", "prod")
	if _, err := r.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	b.Run("whole", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r.snaps = snapshots{} // nothing to link to
			_, done, err := r.Snapshot(ctx, revs[0])
			if err != nil {
				b.Fatal(err)
			}
			done()
			b.StopTimer()
			os.RemoveAll(r.snapshotRoot())
			b.StartTimer()
		}
	})
	b.Run("one-file-changed", func(b *testing.B) {
		r.snaps = snapshots{}
		os.RemoveAll(r.snapshotRoot())
		if _, done, err := r.Snapshot(ctx, revs[0]); err != nil {
			b.Fatal(err)
		} else {
			done()
		}
		b.ResetTimer()
		for i := 0; i < b.N && i+1 < len(revs); i++ {
			_, done, err := r.Snapshot(ctx, revs[i+1])
			if err != nil {
				b.Fatal(err)
			}
			done()
		}
	})
}
