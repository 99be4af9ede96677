package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"io"

	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/release"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// lateTagImages lists a repository whose newest tag shows only from the
// reads'th read on (never, when reads is 0), as the distribution
// registry's list can lag its push notification.
type lateTagImages struct {
	mu           sync.Mutex
	reads, shows int
}

func (l *lateTagImages) Images(_ context.Context, repo string) ([]registry.Image, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	out := []registry.Image{{Repository: repo, Tag: "1.0.0"}}
	if l.shows > 0 && l.reads >= l.shows {
		out = append(out, registry.Image{Repository: repo, Tag: "1.0.1"})
	}
	return out, nil
}

// A notification of a tag the registry does not list yet reads the list
// again until it does (here on the third read), and only then wakes the
// automator; a tag that never shows is given up after the wait, with a
// warning, and nothing fails. A bare repository waits for nothing.
func TestNotifiedTagIsWaitedFor(t *testing.T) {
	for _, tc := range []struct {
		name, image string
		shows       int
		wantReads   int
		wantTags    int
		wantWarn    bool
	}{
		{"shows on the third read", "reg.example/app:1.0.1", 3, 3, 2, false},
		{"never shows", "reg.example/app:1.0.1", 0, 4, 1, true},
		{"listed at once", "reg.example/app:1.0.0", 0, 1, 1, false},
		{"a bare repository", "reg.example/app", 0, 1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imgs := &lateTagImages{shows: tc.shows}
			var logs bytes.Buffer
			aut := &kickCounter{}
			deps := watching(imgs, "reg.example/app")
			deps.Automator = aut
			d := New(Config{}, deps, slog.New(slog.NewTextHandler(&logs, nil)))
			d.tagWait = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 3}
			repo, n, err := d.Notify(context.Background(), auth.Identity{Instance: "i", Role: auth.Deployer}, tc.image)
			if err != nil || repo != "reg.example/app" {
				t.Fatalf("Notify = %q, %v", repo, err)
			}
			if imgs.reads != tc.wantReads || n != tc.wantTags {
				t.Errorf("%d reads, %d tags; want %d reads, %d tags", imgs.reads, n, tc.wantReads, tc.wantTags)
			}
			if warned := strings.Contains(logs.String(), "does not show"); warned != tc.wantWarn {
				t.Errorf("warned %v, want %v:\n%s", warned, tc.wantWarn, logs.String())
			}
			if aut.kicks != 1 {
				t.Errorf("the automator was woken %d times, want once, after the reads", aut.kicks)
			}
		})
	}
}

// kickCounter is an automator that counts its kicks.
type kickCounter struct{ kicks int }

func (k *kickCounter) Kick()                                      { k.kicks++ }
func (k *kickCounter) Statuses() map[platform.ID]automator.Status { return nil }

// At most two notifications wait for their tags at once; a tag given up
// on is not waited for again for ten minutes; and the memory of given-up
// tags is bounded.
func TestTagWaitsAreBounded(t *testing.T) {
	var w tagWaits
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	doneA, okA := w.begin("r", "a", now)
	doneB, okB := w.begin("r", "b", now)
	if _, okC := w.begin("r", "c", now); !okA || !okB || okC {
		t.Fatalf("waits begun: %v %v %v; want two, not the third", okA, okB, okC)
	}
	doneA(false) // never showed
	doneB(true)  // showed
	if _, ok := w.begin("r", "a", now.Add(time.Minute)); ok {
		t.Error("a tag given up on a minute ago is waited for again")
	}
	doneB2, ok := w.begin("r", "b", now.Add(time.Minute))
	if !ok {
		t.Fatal("a tag that showed before is not waited for")
	}
	doneB2(true)
	doneA2, ok := w.begin("r", "a", now.Add(11*time.Minute))
	if !ok {
		t.Fatal("a tag given up on 11 minutes ago is still not waited for")
	}
	doneA2(true)
	for i := range maxGivenUp {
		done, ok := w.begin("r", fmt.Sprint("x", i), now)
		if !ok {
			t.Fatalf("wait %d refused before the memory is full", i)
		}
		done(false)
	}
	if _, ok := w.begin("r", "fresh", now); ok {
		t.Error("a wait began with the memory of given-up tags full")
	}
}

// A notification repeated for a tag that never showed reads the list
// once: it does not hold its webhook worker for the wait again.
func TestRepeatedNotificationOfAMissingTagDoesNotWaitAgain(t *testing.T) {
	imgs := &lateTagImages{}
	d := New(Config{}, watching(imgs, "reg.example/app"), slog.New(slog.DiscardHandler))
	d.tagWait = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 3}
	id := auth.Identity{Instance: "i", Role: auth.Deployer}
	if _, _, err := d.Notify(context.Background(), id, "reg.example/app:9.9.9"); err != nil {
		t.Fatal(err)
	}
	first := imgs.reads
	if _, _, err := d.Notify(context.Background(), id, "reg.example/app:9.9.9"); err != nil {
		t.Fatal(err)
	}
	if first != 4 || imgs.reads-first != 1 {
		t.Errorf("reads: %d for the first notification (want 4), %d for the repeat (want 1)", first, imgs.reads-first)
	}
}

// unreadableTagImages is a registry client whose tag list shows 1.0.1
// from the lists'th list on, and whose scans leave 1.0.1 out, as
// registry/oci's scan leaves out a tag whose metadata cannot be read (an
// artifact, a signature, a manifest not readable yet).
type unreadableTagImages struct {
	mu            sync.Mutex
	lists, shows  int
	scans, images int
}

func (u *unreadableTagImages) Images(_ context.Context, repo string) ([]registry.Image, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.images++
	return []registry.Image{{Repository: repo, Tag: "1.0.0"}}, nil
}

func (u *unreadableTagImages) Refresh(_ context.Context, repo string) ([]registry.Image, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.scans++
	return []registry.Image{{Repository: repo, Tag: "1.0.0"}}, nil
}

func (u *unreadableTagImages) RefreshTags(_ context.Context, _ string) ([]string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.lists++
	if u.lists >= u.shows {
		return []string{"1.0.0", "1.0.1"}, nil
	}
	return []string{"1.0.0"}, nil
}

// A notification of a repository whose users need images' metadata (a
// full scan, every mutable tag checked) waits for its tag by reading the
// tag list alone, and scans once more when the tag shows: each read of
// the wait was a whole forced scan, so a tag whose metadata a scan cannot
// read (listed, but never among the scan's images) cost seven forced
// scans of the repository per notification, and a registry's rate limit
// with them.
func TestNotifiedTagWaitReadsTheListNotScans(t *testing.T) {
	imgs := &unreadableTagImages{shows: 3}
	d := New(Config{}, watching(imgs, "reg.example/app"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if !d.needsMetadata(context.Background(), "reg.example/app") {
		t.Fatal("the test needs a repository whose users need metadata")
	}
	d.tagWait = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 6}
	if _, _, err := d.Notify(context.Background(), auth.Identity{Instance: "i", Role: auth.Deployer}, "reg.example/app:1.0.1"); err != nil {
		t.Fatal(err)
	}
	if imgs.scans > 2 {
		t.Errorf("%d forced scans of the repository for one notification (%d tag lists); want at most 2: the first, and one when the tag showed", imgs.scans, imgs.lists)
	}
}

// An automation that also sets a tag filter is an automation in history
// (history --type automate finds it); only a change of both automation and
// lock, or of filters alone, is a general policy change.
func TestPolicyUpdateHistoryType(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	semver := "semver:~1"
	for _, tc := range []struct {
		name string
		u    PolicyUpdate
		want history.Type
	}{
		{"automate", PolicyUpdate{Automated: &yes}, history.Automate},
		{"automate with a filter", PolicyUpdate{Automated: &yes, Tags: map[string]string{"app": semver}}, history.Automate},
		{"automate with tag-all", PolicyUpdate{Automated: &yes, TagAll: &semver}, history.Automate},
		{"deautomate", PolicyUpdate{Automated: &no}, history.Deautomate},
		{"lock with a filter", PolicyUpdate{Locked: &yes, Tags: map[string]string{"app": semver}}, history.Lock},
		{"unlock", PolicyUpdate{Locked: &no}, history.Unlock},
		{"filter alone", PolicyUpdate{Tags: map[string]string{"app": semver}}, history.Policy},
		{"automate and lock", PolicyUpdate{Automated: &yes, Locked: &yes}, history.Policy},
	} {
		if got := tc.u.historyType(); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
}

// verifiedReleaser plans one update whose image failed verification.
type verifiedReleaser struct{ specReleaser }

func (r *verifiedReleaser) Plan(ctx context.Context, s release.Spec) (*release.Plan, error) {
	_, _ = r.specReleaser.Plan(ctx, s)
	return &release.Plan{Items: []release.Item{{Service: platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}, Action: release.Update,
		Warnings: []string{"web: skipped newer images"},
		Updates: []release.ContainerUpdate{{Container: "web", Current: "reg.example/web:1", Target: "reg.example/web:2",
			Verification: release.Verification{Outcome: release.VerifyUnsigned, Profiles: []string{"signed"}, Digest: "sha256:aa", Detail: "profile signed: unsigned"}}}}}}, nil
}

// --allow-unverified is an admin's: a deployer (or a viewer's plan) is
// refused, saying what to do, before anything is planned; an admin's
// reaches the plan. The plan carries each update's verification and the
// item's warnings.
func TestAllowUnverifiedIsAdminOnly(t *testing.T) {
	rel := &verifiedReleaser{}
	f := newFixtureWith(t, Config{}, Deps{Cluster: &stubCluster{workloads: []platform.Workload{{ID: platform.ID{Namespace: "default", Kind: "deployment", Name: "web"}}}}, Releaser: rel, Jobs: stubJobs{}})
	req := func(kind fluxdv1.ReleaseKind) *fluxdv1.ReleaseRequest {
		return &fluxdv1.ReleaseRequest{Kind: kind, Spec: &fluxdv1.ReleaseSpec{Services: []string{"default:deployment/web"}, Image: "reg.example/web:2", AllowUnverified: true}}
	}
	for _, tc := range []struct {
		role auth.Role
		kind fluxdv1.ReleaseKind
	}{
		{auth.Deployer, fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE},
		{auth.Deployer, fluxdv1.ReleaseKind_RELEASE_KIND_PLAN},
		{auth.Viewer, fluxdv1.ReleaseKind_RELEASE_KIND_PLAN},
	} {
		_, err := f.client.Release(withToken(f.tokens[tc.role]), req(tc.kind))
		help := ""
		for _, d := range status.Convert(err).Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				help = info.GetMetadata()["help"]
			}
		}
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--allow-unverified needs the admin role; your token's role is "+tc.role.String()) ||
			!strings.Contains(help, "cosign sign") {
			t.Errorf("%s %s: %v; want it refused, saying why and what to do", tc.role, tc.kind, err)
		}
	}
	if len(rel.specs) != 0 {
		t.Fatalf("a refused --allow-unverified was planned: %+v", rel.specs)
	}
	resp, err := f.client.Release(withToken(f.tokens[auth.Admin]), req(fluxdv1.ReleaseKind_RELEASE_KIND_PLAN))
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.specs) != 1 || !rel.specs[0].AllowUnverified {
		t.Errorf("an admin's plan: specs %+v; want AllowUnverified passed on", rel.specs)
	}
	it := resp.GetPlan().GetItems()[0]
	v := it.GetUpdates()[0].GetVerification()
	if v.GetOutcome() != "unsigned" || v.GetDigest() != "sha256:aa" || v.GetDetail() != "profile signed: unsigned" || len(v.GetProfiles()) != 1 {
		t.Errorf("verification %+v; want the plan's", v)
	}
	if len(it.GetWarnings()) != 1 {
		t.Errorf("warnings %v; want the item's", it.GetWarnings())
	}
}

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

// A history call asks for at most 10,000 events: more is refused with
// what to do, not answered (a viewer could make fluxd hold any size).
func TestHistoryLimitIsBounded(t *testing.T) {
	f, _ := scopedFixture(t)
	ctx := withToken(f.other[auth.Viewer])
	if _, err := f.client.History(ctx, &fluxdv1.HistoryRequest{Limit: maxHistoryLimit}); err != nil {
		t.Fatalf("the largest limit: %v", err)
	}
	_, err := f.client.History(ctx, &fluxdv1.HistoryRequest{Limit: maxHistoryLimit + 1})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at most 10000") {
		t.Errorf("a limit past the bound: %v", err)
	}
}

// A caller's rollout timeout is capped by the daemon's setting: jobs run
// one at a time for every instance, so one caller's long wait would hold
// everyone's releases.
func TestRolloutTimeoutIsCapped(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     time.Duration
		seconds int32
		refused bool
	}{
		{"default cap, 30m", 0, 30 * 60, false},
		{"default cap, 31m", 0, 31 * 60, true},
		{"default cap, a year", 0, 1 << 30, true},
		{"negative", 0, -1, true},
		{"10m cap, 10m", 10 * time.Minute, 600, false},
		{"10m cap, 11m", 10 * time.Minute, 660, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureWith(t, Config{MaxRolloutTimeout: tc.max}, Deps{Cluster: &stubCluster{}, Releaser: stubReleaser{}, Jobs: stubJobs{}})
			_, err := f.client.Release(withToken(f.tokens[auth.Deployer]), &fluxdv1.ReleaseRequest{
				Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE, RolloutTimeoutSeconds: tc.seconds,
				Spec: &fluxdv1.ReleaseSpec{All: true, AllLatest: true, User: "alice"},
			})
			if tc.refused != (status.Code(err) == codes.InvalidArgument) {
				t.Fatalf("Release: %v; refused %v, want %v", err, status.Code(err) == codes.InvalidArgument, tc.refused)
			}
			if tc.refused && !strings.Contains(status.Convert(err).Message(), "rollout timeout") {
				t.Errorf("the refusal does not say why: %v", err)
			}
		})
	}
}
