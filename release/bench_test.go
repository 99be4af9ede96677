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
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// dirRepo is a Repo over a plain directory: planning reads files only.
type dirRepo struct{ dir string }

func (r dirRepo) Sync(context.Context) (string, error) { return "rev", nil }
func (r dirRepo) Dir() string                          { return r.dir }
func (r dirRepo) Paths() []string                      { return []string{"."} }
func (r dirRepo) Commit(context.Context, string, map[string][]byte, string, gitrepo.Signature) (string, error) {
	return "", fmt.Errorf("dirRepo does not commit")
}
func (r dirRepo) Push(context.Context, string) error                      { return fmt.Errorf("dirRepo does not push") }
func (r dirRepo) FindCommit(context.Context, string, int) (string, error) { return "", nil }

// memImages is registry data already cached in memory.
type memImages map[string][]registry.Image

func (m memImages) ImagesMatching(_ context.Context, repo string, keep func(string) bool) ([]registry.Image, error) {
	imgs, ok := m[repo]
	if !ok {
		return nil, fmt.Errorf("no repository %s", repo)
	}
	var out []registry.Image
	for _, i := range imgs {
		if keep == nil || keep(i.Tag) {
			out = append(out, i)
		}
	}
	registry.SortNewestFirst(out)
	return out, nil
}

func (m memImages) Tags(_ context.Context, repo string) ([]string, error) {
	imgs, ok := m[repo]
	if !ok {
		return nil, fmt.Errorf("no repository %s", repo)
	}
	var out []string
	for _, i := range imgs {
		out = append(out, i.Tag)
	}
	return out, nil
}

func (m memImages) Exists(_ context.Context, ref string) (bool, error) {
	r, err := registry.ParseRef(ref)
	if err != nil {
		return false, err
	}
	_, ok := findTag(m[r.Repository], r.Tag)
	return ok, nil
}

type noCluster struct{}

func (noCluster) Workloads(context.Context) ([]platform.Workload, error)    { return nil, nil }
func (noCluster) Diagnose(context.Context, platform.ID) string              { return "" }
func (noCluster) Apply(context.Context, platform.ID, []byte) (int64, error) { return 1, nil }

type noRecorder struct{}

func (noRecorder) Record(context.Context, history.Event) (int64, error) { return 0, nil }

const benchDoc = `# workload %[1]d
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  namespace: ns-%[2]d
  labels: {app: app-%[1]d}
spec:
  replicas: 2
  template:
    spec:
      initContainers:
        - name: init
          image: reg.example/init-%[3]d:1.0.0
      containers:
        - name: app
          image: "reg.example/app-%[3]d:1.0.0" # pinned by CI
          ports: [{containerPort: 8080}]
        - name: sidecar
          image: reg.example/sidecar:1.0.49
`

// writeBenchRepo writes 1,000 workloads in 300 files, one of them with 200
// documents, using 100 image repositories of 50 tags each.
func writeBenchRepo(tb testing.TB) (string, memImages) {
	tb.Helper()
	dir := tb.TempDir()
	n := 0
	big := &strings.Builder{}
	for i := 0; i < 200; i++ {
		if i > 0 {
			big.WriteString("---\n")
		}
		fmt.Fprintf(big, benchDoc, n, n%20, n%100)
		n++
	}
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(big.String()), 0o644); err != nil {
		tb.Fatal(err)
	}
	// 299 more files hold the other 800 workloads.
	for f := 0; f < 299; f++ {
		sub := filepath.Join(dir, fmt.Sprintf("team-%d", f%10))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			tb.Fatal(err)
		}
		b := &strings.Builder{}
		for k := 0; k < 3 && n < 1000; k++ {
			if k > 0 {
				b.WriteString("---\n")
			}
			fmt.Fprintf(b, benchDoc, n, n%20, n%100)
			n++
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("f%d.yaml", f)), []byte(b.String()), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if n != 1000 {
		tb.Fatalf("wrote %d workloads", n)
	}
	images := memImages{}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(repo string) {
		var imgs []registry.Image
		for t := 0; t < 50; t++ {
			imgs = append(imgs, registry.Image{Repository: repo, Tag: fmt.Sprintf("1.0.%d", t), CreatedAt: t0.Add(time.Duration(t) * time.Hour)})
		}
		registry.SortNewestFirst(imgs)
		images[repo] = imgs
	}
	for r := 0; r < 100; r++ {
		add(fmt.Sprintf("reg.example/app-%d", r))
		add(fmt.Sprintf("reg.example/init-%d", r))
	}
	add("reg.example/sidecar")
	return dir, images
}

// BenchmarkPlanAllLatest plans --all --update-all-images over 1,000
// workloads in 300 files with registry data already cached.
func BenchmarkPlanAllLatest(b *testing.B) {
	dir, images := writeBenchRepo(b)
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	spec := Spec{All: true, AllLatest: true, User: "bench"}
	b.ReportAllocs()
	for b.Loop() {
		p, err := e.Plan(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Items) != 1000 || p.Updates() != 2000 {
			b.Fatalf("plan has %d items and %d updates; want 1000 and 2000", len(p.Items), p.Updates())
		}
	}
}
