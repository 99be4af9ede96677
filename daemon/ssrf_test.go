package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/release"
)

// internalSecret is what an internal service answers: it must never
// reach a caller of fluxd.
const internalSecret = "INTERNAL-ONLY admin_password=hunter2"

// internalServer is an HTTP service inside the network that answers
// every request 418 with a secret body, and counts requests.
func internalServer(t *testing.T) (host string, requests *atomic.Int64) {
	t.Helper()
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, internalSecret)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), requests
}

// stallingRegistry accepts requests and answers none until the test ends;
// arrived is told of each request.
func stallingRegistry(t *testing.T) (host string, arrived chan string) {
	t.Helper()
	arrived = make(chan string, 100)
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- r.URL.Path:
		default:
		}
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	return strings.TrimPrefix(srv.URL, "http://"), arrived
}

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// gitWithImages makes a bare repository whose deploy/app.yaml runs a
// Deployment "app" per image given, and opens fluxd's clone of it.
func gitWithImages(t *testing.T, images ...string) *gogit.Repo {
	t.Helper()
	dir := t.TempDir()
	bare, work := filepath.Join(dir, "remote.git"), filepath.Join(dir, "seed")
	git(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	git(t, dir, "init", "-q", "-b", "main", work)
	var b bytes.Buffer
	for i, img := range images {
		fmt.Fprintf(&b, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app%d\n  namespace: default\nspec:\n  template:\n    spec:\n      containers:\n        - name: app\n          image: %s\n", i, img)
	}
	if err := os.WriteFile(filepath.Join(work, "app.yaml"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, work, "add", ".")
	git(t, work, "commit", "-q", "-m", "seed")
	git(t, work, "push", "-q", bare, "main")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	repo, err := gogit.Open(ctx, gogit.Config{URL: "file://" + bare, Branch: "main", User: "fluxd", Email: "fluxd@example.com", Dir: filepath.Join(dir, "clone")})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

type discardRecorder struct{}

func (discardRecorder) Record(context.Context, history.Event) (int64, error) { return 1, nil }

// realReleaser is a release engine over a real git clone and a real
// registry client, served by the fixture.
func realReleaser(t *testing.T, images ...string) (*fixture, *release.Engine, *Daemon) {
	t.Helper()
	return realReleaserWith(t, nil, images...)
}

// realReleaserWith is realReleaser with deps changed by edit first.
func realReleaserWith(t *testing.T, edit func(*Deps), images ...string) (*fixture, *release.Engine, *Daemon) {
	t.Helper()
	repo := gitWithImages(t, images...)
	client, err := oci.New(oci.Config{RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	log := slog.New(slog.DiscardHandler)
	cluster := &stubCluster{}
	engine := release.NewEngine(repo, client, nil, discardRecorder{}, log)
	deps := Deps{Cluster: cluster, Releaser: engine, Images: client, Jobs: stubJobs{}}
	if edit != nil {
		edit(&deps)
	}
	f := newFixtureWith(t, Config{}, deps)
	return f, engine, f.daemon
}

func TestRegistryErrorsCarryHostAndStatusNeverTheBody(t *testing.T) {
	internal, requests := internalServer(t)
	// A service does run an image of the internal host: fluxd reads it,
	// and the caller learns the host and the status only.
	f, _, _ := realReleaser(t, internal+"/internal/x:1")
	ctx := withToken(f.tokens[auth.Viewer])
	_, err := f.client.Release(ctx, &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN, Spec: &fluxdv1.ReleaseSpec{All: true, Image: internal + "/internal/x:2"}})
	if err == nil {
		t.Fatal("the plan succeeded against a registry that answers 418")
	}
	if requests.Load() == 0 {
		t.Fatal("fluxd made no request for a watched repository")
	}
	msg := status.Convert(err).Message()
	for _, want := range []string{"registry " + internal, "418"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q: %s", want, msg)
		}
	}
	if strings.Contains(err.Error(), "admin_password") || strings.Contains(err.Error(), "INTERNAL-ONLY") {
		t.Fatalf("the registry's body reached the caller: %v", err)
	}
	// fluxd's answer says it is fluxd's (fluxctl then does not blame its
	// own connection for words about TLS in it).
	fromFluxd := false
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			fromFluxd = true
		}
	}
	if !fromFluxd {
		t.Fatalf("the error carries no ErrorInfo of domain %s: %v", ErrorDomain, err)
	}
}

func TestAStalledRegistryHoldsNoGitLock(t *testing.T) {
	stalled, arrived := stallingRegistry(t)
	f, engine, _ := realReleaser(t, stalled+"/team/app:1.0", "registry.invalid/other:1")
	viewer := withToken(f.tokens[auth.Viewer])

	planDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(viewer, 2*time.Minute)
		defer cancel()
		_, err := f.client.Release(ctx, &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN, Spec: &fluxdv1.ReleaseSpec{All: true, Image: stalled + "/team/app:2.0"}})
		planDone <- err
	}()
	execDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_, err := engine.Execute(ctx, "team-a", release.Spec{All: true, Image: stalled + "/team/app:3.0", User: "someone"}, history.Release, release.ExecOptions{})
		execDone <- err
	}()
	// They wait on the registry now (they share its connection set-up,
	// so it may hear one request).
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled registry never heard from fluxd")
	}
	// A deployer's lock goes through while both wait on the registry.
	ctx, cancel := context.WithTimeout(withToken(f.tokens[auth.Deployer]), 30*time.Second)
	defer cancel()
	if _, err := f.client.Lock(ctx, &fluxdv1.LockRequest{Service: "default:deployment/app1", Message: "incident", User: "dev"}); err != nil {
		t.Fatalf("a deployer's lock failed while a plan waited on a stalled registry: %v", err)
	}
	select {
	case err := <-planDone:
		t.Fatalf("the plan ended (%v) although the registry never answered", err)
	case err := <-execDone:
		t.Fatalf("the execution ended (%v) although the registry never answered", err)
	default:
	}
}
