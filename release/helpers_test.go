package release

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"fmt"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// realGit is an engine on a real git remote (a bare repository, pushed to
// by fluxd through go-git and by people through the git CLI) and a real
// SQLite history file; only the cluster is a recording fake.
type realGit struct {
	e       *Engine
	repo    *gogit.Repo
	bare    string
	store   *sqlite.Store
	cluster *recCluster
}

// gitCLI runs the git CLI as a person would.
func gitCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=oncall", "GIT_AUTHOR_EMAIL=oncall@example.com", "GIT_COMMITTER_NAME=oncall", "GIT_COMMITTER_EMAIL=oncall@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func newRealGit(t *testing.T, files map[string]string) *realGit {
	t.Helper()
	dir := t.TempDir()
	bare := filepath.Join(dir, "remote.git")
	seed := filepath.Join(dir, "seed")
	gitCLI(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	gitCLI(t, dir, "init", "-q", "-b", "main", seed)
	for name, content := range files {
		p := filepath.Join(seed, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitCLI(t, seed, "add", ".")
	gitCLI(t, seed, "commit", "-q", "-m", "seed")
	gitCLI(t, seed, "push", "-q", bare, "main")
	repo, err := gogit.Open(context.Background(), gogit.Config{URL: "file://" + bare, Branch: "main", User: "fluxd", Email: "fluxd@example.com", Dir: filepath.Join(dir, "clone")})
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	images := memImages{
		"reg/web": {{Repository: "reg/web", Tag: "1.2", CreatedAt: t0.Add(2 * time.Hour)}, {Repository: "reg/web", Tag: "1.1", CreatedAt: t0.Add(time.Hour)}, {Repository: "reg/web", Tag: "1.0", CreatedAt: t0}},
		"reg/api": {{Repository: "reg/api", Tag: "2.1", CreatedAt: t0.Add(time.Hour)}, {Repository: "reg/api", Tag: "2.0", CreatedAt: t0}},
	}
	cluster := &recCluster{applied: map[platform.ID]string{}}
	e := NewEngine(repo, images, cluster, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return &realGit{e: e, repo: repo, bare: bare, store: store, cluster: cluster}
}

// personEdits commits and pushes files as a person would, with the git
// CLI, and returns the new head.
func (g *realGit) personEdits(t *testing.T, msg string, files map[string]string) string {
	t.Helper()
	work := filepath.Join(t.TempDir(), "person")
	gitCLI(t, "", "clone", "-q", "-b", "main", g.bare, work)
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitCLI(t, work, "add", ".")
	gitCLI(t, work, "commit", "-q", "-m", msg)
	gitCLI(t, work, "push", "-q", "origin", "main")
	return gitCLI(t, g.bare, "rev-parse", "main")
}

// remoteFile is a file as the remote's branch has it.
func (g *realGit) remoteFile(t *testing.T, name string) string {
	t.Helper()
	return gitCLI(t, g.bare, "show", "main:"+name)
}

func (g *realGit) events(t *testing.T) []history.Event {
	t.Helper()
	evs, err := g.store.Events(context.Background(), "team", history.Query{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func deployment(name, image string, annotations ...string) string {
	ann := ""
	if len(annotations) > 0 {
		ann = "  annotations:\n"
		for i := 0; i+1 < len(annotations); i += 2 {
			ann += "    " + annotations[i] + ": \"" + annotations[i+1] + "\"\n"
		}
	}
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: " + name + "\n" + ann +
		"spec:\n  template:\n    spec:\n      containers:\n        - name: " + name + "\n          image: " + image + "\n"
}

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
