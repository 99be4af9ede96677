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

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"golang.org/x/tools/txtar"
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
			e, repo, cluster, files := layoutEngine(t, p, nil)
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

// layoutEngine is an engine over the repository of the archive at path
// (see TestFluxV2Layouts), with edit applied to its files first; files
// are the archive's.
func layoutEngine(t *testing.T, path string, edit func(map[string]string)) (*Engine, *recRepo, *recCluster, map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, f := range txtar.Parse(b).Files {
		files[f.Name] = string(f.Data)
	}
	if edit != nil {
		edit(files)
	}
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
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	repo := &recRepo{dirRepo: dirRepo{dir}}
	cluster := &recCluster{applied: map[platform.ID]string{}}
	e := NewEngine(repo, memImages{"reg/app": imgs}, cluster, &recRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return e, repo, cluster, files
}

// A marker on a shared base's images: entry moves every overlay built
// from it, so a lock on any of them holds the policy, and a scoped
// instance holds the policy only with every one of them.
func TestFluxV2BaseMarkerLocksAndScopes(t *testing.T) {
	t.Parallel()
	fixture := filepath.Join("testdata", "fluxv2", "base-and-overlays.txtar")
	t.Run("a locked overlay holds the automated release", func(t *testing.T) {
		t.Parallel()
		e, repo, cluster, _ := layoutEngine(t, fixture, func(files map[string]string) {
			files["apps/prod/kustomization.yaml"] += "commonAnnotations:\n  fluxd.io/locked: \"true\"\n"
		})
		spec := Spec{Services: []platform.ID{appPolicy}, AllLatest: true, User: "automator", Automated: true}
		res, err := e.Execute(context.Background(), "", spec, history.AutomatedRelease, ExecOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Plan.Updates() != 0 || repo.files != nil || len(cluster.applied) != 0 {
			t.Fatalf("a policy whose base moves a locked overlay was released: %+v, committed %v", rows(res.Plan), repo.files)
		}
		if r := res.Plan.Items[0].Reason; !strings.Contains(r, "prod:deployment/prod-app") {
			t.Errorf("the skip's reason %q does not name the locked overlay", r)
		}
	})
	t.Run("a scope without one overlay's namespace does not hold the policy", func(t *testing.T) {
		t.Parallel()
		e, _, _, _ := layoutEngine(t, fixture, nil)
		dirs, err := gitrepo.ResolvePaths(e.repo.Dir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		m, err := gitrepo.FindWorkloads(e.repo.Dir(), dirs)
		if err != nil {
			t.Fatal(err)
		}
		def := m.Workloads[appPolicy]
		all := &auth.Scope{Namespaces: []string{"flux-system", "default", "staging", "prod", "pinned"}}
		if !InScope(all, appPolicy, def, m) {
			t.Errorf("a scope of every namespace does not hold the policy")
		}
		// pinned sets its own tag: the base does not move it.
		noPinned := &auth.Scope{Namespaces: []string{"flux-system", "default", "staging", "prod"}}
		if !InScope(noPinned, appPolicy, def, m) {
			t.Errorf("the policy needs the namespace of an overlay it does not move")
		}
		noProd := &auth.Scope{Namespaces: []string{"flux-system", "default", "staging", "pinned"}}
		if InScope(noProd, appPolicy, def, m) {
			t.Errorf("a scope without prod holds a policy whose base moves prod's Deployment")
		}
	})
}

// Flux v2's digestReflectionPolicy when a tag is pushed again with new
// content (its digest moves, the tag does not): IfNotPresent keeps the
// digest a field holds until the tag changes; Always writes the new one.
func TestFluxV2DigestReflectionOnAMovedTag(t *testing.T) {
	t.Parallel()
	fixture := filepath.Join("testdata", "fluxv2", "digest-reflection.txtar")
	const moved = "sha256:1001000000000000000000000000000000000000000000000000000000000000"
	for _, c := range []struct {
		policy  string
		release bool
	}{{"IfNotPresent", false}, {"Always", true}} {
		t.Run(c.policy, func(t *testing.T) {
			t.Parallel()
			e, repo, _, _ := layoutEngine(t, fixture, func(files map[string]string) {
				files["tags"] = "1.0.0 " + moved + "\n"
				files["flux/objects.yaml"] = strings.Replace(files["flux/objects.yaml"], "digestReflectionPolicy: IfNotPresent", "digestReflectionPolicy: "+c.policy, 1)
			})
			spec := Spec{Services: []platform.ID{appPolicy}, AllLatest: true, User: "automator", Automated: true}
			res, err := e.Execute(context.Background(), "", spec, history.AutomatedRelease, ExecOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := string(repo.files["apps/plain/app.yaml"])
			switch {
			case !c.release && (res.Plan.Updates() != 0 || repo.files != nil):
				t.Errorf("IfNotPresent released a moved digest of the same tag: %+v", rows(res.Plan))
			case c.release && (!strings.Contains(got, "reg/app:1.0.0@"+moved) || !strings.Contains(got, "digest: "+moved)):
				t.Errorf("Always did not write the moved digest in the whole-image and :digest fields:\n%s", got)
			}
		})
	}
}
