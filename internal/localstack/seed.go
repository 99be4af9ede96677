package localstack

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// manifests are the example workloads; "REGISTRY" stands for the
// registry's host:port.
//
//go:embed manifests/*.yaml
var manifests embed.FS

// ExampleImages are the repositories and tags pushed to the registry, oldest
// first; each tag's image is created one day after the one before it.
var ExampleImages = []struct {
	Repo string
	Tags []string
}{
	{"helloworld", []string{"1.0.0", "1.1.0", "1.2.0"}},
	{"sidecar", []string{"1.0", "1.1"}},
	{"redis", []string{"7.0.0", "7.0.5", "7.2.0"}},
	{"worker", []string{"1.0.0", "1.0.1", "1.1.0"}},
}

// ExampleServices are the workloads the example manifests define.
var ExampleServices = []string{
	"default:deployment/helloworld",
	"default:deployment/redis",
	"default:deployment/worker",
}

func (s *Stack) startRegistry(ctx context.Context) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	s.Registry = "127.0.0.1:" + strconv.Itoa(port)
	p, err := s.spawn("registry", s.bin("crane"), "registry", "serve",
		"--address="+s.Registry, "--disk="+filepath.Join(s.Dir, "registry"))
	if err != nil {
		return err
	}
	return waitFor(ctx, p, 30*time.Second, "registry /v2/", func() error {
		return httpOK(http.DefaultClient, "http://"+s.Registry+"/v2/", "")
	})
}

func (s *Stack) seedImages(ctx context.Context) error {
	pusher, err := remote.NewPusher(remote.WithContext(ctx))
	if err != nil {
		return err
	}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, ex := range ExampleImages {
		for _, tag := range ex.Tags {
			if err := s.push(ctx, pusher, ex.Repo, tag, created); err != nil {
				return err
			}
			created = created.Add(24 * time.Hour)
		}
	}
	return nil
}

// PushImage pushes a new random image as repo:tag, created at created.
func (s *Stack) PushImage(ctx context.Context, repo, tag string, created time.Time) error {
	pusher, err := remote.NewPusher(remote.WithContext(ctx))
	if err != nil {
		return err
	}
	return s.push(ctx, pusher, repo, tag, created)
}

func (s *Stack) push(ctx context.Context, pusher *remote.Pusher, repo, tag string, created time.Time) error {
	ref, err := name.NewTag(s.Registry+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		return err
	}
	img, err := random.Image(512, 1)
	if err != nil {
		return err
	}
	if img, err = mutate.CreatedAt(img, v1.Time{Time: created}); err != nil {
		return err
	}
	if err := pusher.Push(ctx, ref, img); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

// renderManifests returns the example manifests with the registry filled in.
func (s *Stack) renderManifests() (map[string][]byte, error) {
	entries, err := manifests.ReadDir("manifests")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := manifests.ReadFile("manifests/" + e.Name())
		if err != nil {
			return nil, err
		}
		out[e.Name()] = bytes.ReplaceAll(b, []byte("REGISTRY"), []byte(s.Registry))
	}
	return out, nil
}

// seedGit makes a bare repository with the manifests under deploy/ on
// branch main, committed with the git CLI.
func (s *Stack) seedGit(ctx context.Context) error {
	bare := filepath.Join(s.Dir, "git", "manifests.git")
	s.GitURL, s.GitBranch, s.GitPath = "file://"+bare, "main", "deploy"
	if _, err := os.Stat(filepath.Join(bare, "HEAD")); err == nil {
		return nil
	}
	work, err := os.MkdirTemp(s.Dir, "seed-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	files, err := s.renderManifests()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(work, s.GitPath), 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(work, s.GitPath, name), b, 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "--bare", "-b", "main", bare},
		{"-C", work, "init", "-q", "-b", "main"},
		{"-C", work, "add", "."},
		{"-C", work, "-c", "user.name=fluxd stack", "-c", "user.email=stack@fluxd.invalid", "commit", "-q", "-m", "Add example manifests"},
		{"-C", work, "push", "-q", bare, "main"},
	} {
		if err := git(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

func git(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// applyManifests applies the example manifests to the cluster with
// server-side apply, and waits until the Deployments have rolled out on
// the fake nodes.
func (s *Stack) applyManifests(ctx context.Context) error {
	files, err := s.renderManifests()
	if err != nil {
		return err
	}
	for fname, b := range files {
		objs, err := decodeObjects(b)
		if err != nil {
			return fmt.Errorf("%s: %w", fname, err)
		}
		if err := s.apply(ctx, objs); err != nil {
			return fmt.Errorf("%s: %w", fname, err)
		}
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	return waitFor(ctx, nil, 90*time.Second, "example Deployments rolled out", func() error {
		ds, err := c.AppsV1().Deployments("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, d := range ds.Items {
			if !rolledOut(&d) {
				return fmt.Errorf("deployment %s: %d/%d available", d.Name, d.Status.AvailableReplicas, *d.Spec.Replicas)
			}
		}
		if len(ds.Items) < len(ExampleServices) {
			return fmt.Errorf("%d of %d deployments exist", len(ds.Items), len(ExampleServices))
		}
		return nil
	})
}

func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	return st.ObservedGeneration >= d.Generation && st.UpdatedReplicas == want && st.AvailableReplicas == want && st.Replicas == want
}
