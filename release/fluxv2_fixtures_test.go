package release

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/txtar"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// TestFluxV2Layouts runs the automator's release of flux-system:app over
// each repository in testdata/fluxv2 (an archive named after the layout
// and the Flux v2 rule it checks): "tags" are reg/app's tags and digests
// (TAG DIGEST, oldest first); the commit must hold each want/ file byte
// for byte, and exactly the workloads of "applied" are applied. The
// commit passes the render check, so what moved is what was planned.
func TestFluxV2Layouts(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "fluxv2", "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, p := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(p), ".txtar"), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			files := txtar.Parse(string(b)).Map()
			dir := t.TempDir()
			var imgs []registry.Image
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for f, content := range files {
				switch {
				case f == "tags":
					for i, line := range strings.Split(strings.TrimSpace(content), "\n") {
						tag, digest, _ := strings.Cut(line, " ")
						imgs = append(imgs, registry.Image{Repository: "reg/app", Tag: tag, Digest: digest, CreatedAt: t0.Add(time.Duration(i) * time.Hour)})
					}
				case f == "applied" || strings.HasPrefix(f, "want/"):
				default:
					path := filepath.Join(dir, f)
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			repo := &recRepo{dirRepo: dirRepo{dir}}
			cluster := &recCluster{applied: map[platform.ID]string{}}
			e := NewEngine(repo, memImages{"reg/app": imgs}, cluster, &recRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			spec := Spec{Services: []platform.ID{appPolicy}, AllLatest: true, User: "automator", Automated: true}
			res, err := e.Execute(context.Background(), "", spec, history.AutomatedRelease, ExecOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Plan.Updates() == 0 {
				t.Fatalf("nothing planned: %+v", rows(res.Plan))
			}
			for f, want := range files {
				if name, ok := strings.CutPrefix(f, "want/"); ok {
					if diff := cmp.Diff(want, string(repo.files[name])); diff != "" {
						t.Errorf("the commit's %s (-want +got)\n%s", name, diff)
					}
				}
			}
			var applied []string
			for id := range cluster.applied {
				applied = append(applied, id.String())
			}
			sort.Strings(applied)
			if diff := cmp.Diff(strings.Split(strings.TrimSpace(files["applied"]), "\n"), applied); diff != "" {
				t.Errorf("applied (-want +got)\n%s", diff)
			}
		})
	}
}
