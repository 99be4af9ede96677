package release

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/cosigntest"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/verify"
	"github.com/google/go-containerregistry/pkg/name"
)

// fakeVerifier requires profile "signed" of the repositories in repos,
// and answers each digest's outcome from outcomes (unsigned when absent).
// It counts the checks it is asked.
type fakeVerifier struct {
	repos    map[string]bool
	outcomes map[string]verify.Outcome
	mu       sync.Mutex
	checked  []string
}

func (f *fakeVerifier) Required(ann map[string]string, container, repository string) ([]string, error) {
	if name := verify.Annotated(ann, container); name != "" && name != "signed" {
		return nil, fmt.Errorf("container %s asks for verification profile %q, which the verification config does not define (profiles: signed)", container, name)
	}
	if f.repos[repository] || verify.Annotated(ann, container) != "" {
		return []string{"signed"}, nil
	}
	return nil, nil
}

func (f *fakeVerifier) Check(_ context.Context, _ map[string]string, _, repository, digest string) (verify.Verdict, error) {
	f.mu.Lock()
	f.checked = append(f.checked, digest)
	f.mu.Unlock()
	o, ok := f.outcomes[digest]
	if !ok {
		o = verify.Unsigned
	}
	r := verify.Result{Digest: digest, Profile: "signed", Outcome: o}
	switch o {
	case verify.Verified:
		r.Signer = "key sha256:ci (ci.pub)"
	case verify.Failed:
		r.Reason, r.Detail = verify.WrongKey, "1 signature(s), none by the key(s) of profile \"signed\""
	case verify.Unsigned:
		r.Detail = "no cosign signature for " + digest
	}
	return verify.Verdict{Digest: digest, Results: []verify.Result{r}}, nil
}

func (f *fakeVerifier) checks() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.checked)
}

// verifyImages are reg/app's versions 1.0.0 to 1.3.0 at digests 1 to 4,
// and reg/other's 1.0.0 and 2.0.0.
func verifyImages() memImages {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := memImages{}
	for i, tag := range []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0"} {
		m["reg/app"] = append(m["reg/app"], registry.Image{Repository: "reg/app", Tag: tag, Digest: dg(byte('1' + i)), CreatedAt: t0.Add(time.Duration(i) * time.Hour)})
	}
	m["reg/other"] = []registry.Image{{Repository: "reg/other", Tag: "1.0.0", Digest: dg('a')}, {Repository: "reg/other", Tag: "2.0.0", Digest: dg('b')}}
	return m
}

func verifyEngine(t *testing.T, images Images, yaml string, v Verifier) *Engine {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if v != nil {
		e.SetVerifier(v)
	}
	return e
}

// With AllLatest, the newest candidate that verifies is planned, the
// newer ones skipped are named with why, and no candidate older than the
// one that verifies is checked.
func TestPlanLatestPicksTheNewestThatVerifies(t *testing.T) {
	semver := `fluxd.io/tag-all: "semver:*"`
	for _, tc := range []struct {
		name     string
		yaml     string
		outcomes map[string]verify.Outcome
		want     []string // flattened updates
		outcome  string   // of the one update
		warn     []string // in the item's warnings
		reason   string   // when skipped
		checks   int
	}{
		{name: "the newest verifies",
			yaml:     pinDeploy("s", "reg/app:1.0.0", semver),
			outcomes: map[string]verify.Outcome{dg('4'): verify.Verified},
			want:     []string{"s: app:reg/app:1.0.0->reg/app:1.3.0"}, outcome: VerifyVerified, checks: 1},
		{name: "newer unsigned and wrongly signed images are skipped, and the warning says why",
			yaml:     pinDeploy("s", "reg/app:1.0.0", semver),
			outcomes: map[string]verify.Outcome{dg('3'): verify.Failed, dg('2'): verify.Verified, dg('1'): verify.Verified},
			want:     []string{"s: app:reg/app:1.0.0->reg/app:1.1.0"}, outcome: VerifyVerified, checks: 3,
			warn: []string{"app: skipped newer images that do not pass signature verification: reg/app:1.3.0 (unsigned: profile signed: unsigned: no cosign signature for " + dg('4') + "); " +
				"reg/app:1.2.0 (failed: profile signed: failed (wrong-key)", "releasing reg/app:1.1.0, the newest that does"}},
		{name: "none newer verifies: nothing is released, and the running image is not checked",
			yaml:   pinDeploy("s", "reg/app:1.1.0", semver),
			reason: ReasonUnverified, checks: 2,
			warn: []string{"reg/app:1.3.0 (unsigned", "reg/app:1.2.0 (unsigned", "none newer than reg/app:1.1.0 does, so it stays"}},
		{name: "pinned: the digest verified is the digest written",
			yaml:     pinDeploy("s", "reg/app:1.0.0@"+dg('1'), semver, `fluxd.io/pin-digest: "true"`),
			outcomes: map[string]verify.Outcome{dg('3'): verify.Verified},
			want:     []string{"s: app:reg/app:1.0.0@" + dg('1') + "->reg/app:1.2.0@" + dg('3')}, outcome: VerifyVerified, checks: 2,
			warn: []string{"reg/app:1.3.0@" + dg('4') + " (unsigned"}},
		{name: "a repository no profile applies to is not verified",
			yaml:    pinDeploy("s", "reg/other:1.0.0", semver),
			want:    []string{"s: app:reg/other:1.0.0->reg/other:2.0.0"},
			outcome: VerifyNotRequired, checks: 0},
		{name: "an annotation asks for a profile where no rule does",
			yaml:     pinDeploy("s", "reg/other:1.0.0", semver, `fluxd.io/verify: signed`),
			outcomes: map[string]verify.Outcome{dg('b'): verify.Verified},
			want:     []string{"s: app:reg/other:1.0.0->reg/other:2.0.0"}, outcome: VerifyVerified, checks: 1},
		{name: "an annotation naming no profile releases nothing, and says so",
			yaml:   pinDeploy("s", "reg/other:1.0.0", semver, `fluxd.io/verify: sigend`),
			reason: ReasonUnverified, checks: 0,
			warn: []string{`asks for verification profile "sigend", which the verification config does not define`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := &fakeVerifier{repos: map[string]bool{"reg/app": true}, outcomes: tc.outcomes}
			e := verifyEngine(t, verifyImages(), tc.yaml, v)
			plan, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("s")}, AllLatest: true})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, flatten(plan)); d != "" {
				t.Errorf("updates (-want +got):\n%s", d)
			}
			it := plan.Items[0]
			if len(it.Updates) == 1 && it.Updates[0].Verification.Outcome != tc.outcome {
				t.Errorf("verification %+v, want %s", it.Updates[0].Verification, tc.outcome)
			}
			if tc.outcome == VerifyVerified && (!strings.Contains(it.Updates[0].Verification.String(), "key sha256:ci") || it.Updates[0].Verification.Digest == "") {
				t.Errorf("verification %q does not name the signer and digest", it.Updates[0].Verification)
			}
			warnings := strings.Join(it.Warnings, "\n")
			for _, w := range tc.warn {
				if !strings.Contains(warnings, w) {
					t.Errorf("no warning says %q; got:\n%s", w, warnings)
				}
			}
			if tc.reason != "" && (it.Action != Skip || it.Reason != tc.reason) {
				t.Errorf("%s %q, want a skip: %s", it.Action, it.Reason, tc.reason)
			}
			if got := v.checks(); got != tc.checks {
				t.Errorf("%d verifications (%v), want %d", got, v.checked, tc.checks)
			}
		})
	}
}

// A release by hand of an image that does not verify is refused, with
// --force too; AllowUnverified releases it and the commit says so.
func TestReleaseByHandOfAnUnverifiedImage(t *testing.T) {
	t.Parallel()
	v := &fakeVerifier{repos: map[string]bool{"reg/app": true}, outcomes: map[string]verify.Outcome{dg('3'): verify.Verified, dg('4'): verify.Failed}}
	e := verifyEngine(t, verifyImages(), pinDeploy("s", "reg/app:1.0.0"), v)
	ctx := context.Background()
	for _, spec := range []Spec{
		{Services: []platform.ID{id("s")}, Image: "reg/app:1.3.0"},
		{Services: []platform.ID{id("s")}, Image: "reg/app:1.3.0", Force: true},
		{All: true, Image: "reg/app:1.3.0"},
	} {
		_, err := e.Plan(ctx, spec)
		if err == nil || fluxerr.KindOf(err) != fluxerr.Precondition ||
			!strings.Contains(err.Error(), "cannot release default:deployment/s: its image does not pass signature verification: container app: reg/app:1.3.0 is failed: profile signed: failed (wrong-key)") ||
			!strings.Contains(err.Error(), "--allow-unverified") {
			t.Errorf("%+v: %v; want a refusal saying why and what to do", spec, err)
		}
	}
	if _, err := e.Plan(ctx, Spec{Services: []platform.ID{id("s")}, Image: "reg/app:1.1.0"}); err == nil || !strings.Contains(err.Error(), "is unsigned") {
		t.Errorf("an unsigned image: %v; want it refused as unsigned", err)
	}
	p, err := e.Plan(ctx, Spec{Services: []platform.ID{id("s")}, Image: "reg/app:1.2.0"})
	if err != nil {
		t.Fatal(err)
	}
	if u := p.Items[0].Updates; len(u) != 1 || u[0].Verification.Outcome != VerifyVerified || u[0].Verification.Digest != dg('3') {
		t.Errorf("a verified image: %+v; want it planned, verified at its digest", p.Items[0])
	}

	spec := Spec{Services: []platform.ID{id("s")}, Image: "reg/app:1.3.0", AllowUnverified: true, User: "ops", Message: "hotfix"}
	p, err = e.Plan(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if u := p.Items[0].Updates; len(u) != 1 || u[0].Verification.Outcome != VerifyFailed {
		t.Fatalf("allowed unverified: %+v; want the update with its failed verification", p.Items[0])
	}
	if w := strings.Join(p.Items[0].Warnings, " "); !strings.Contains(w, "released unverified") {
		t.Errorf("warnings %q do not say it is released unverified", w)
	}
	msg := commitMessage("inst", spec, p)
	if !strings.Contains(msg, "hotfix\n\nReleased unverified with --allow-unverified: default:deployment/s app=reg/app:1.3.0 (failed: profile signed: failed (wrong-key)") {
		t.Errorf("the commit message does not record the unverified release:\n%s", msg)
	}
	ev := event("inst", spec, p, history.Release, time.Now())
	if !strings.Contains(ev.Message, "Released unverified with --allow-unverified") {
		t.Errorf("the history event's message does not record it: %q", ev.Message)
	}
	want := []history.Change{{Service: "default:deployment/s", Container: "app", From: "reg/app:1.0.0", To: "reg/app:1.3.0",
		Verification: &history.Verification{Outcome: VerifyFailed, Profiles: []string{"signed"}, Digest: dg('4'),
			Detail: "profile signed: failed (wrong-key): 1 signature(s), none by the key(s) of profile \"signed\""}}}
	if d := cmp.Diff(want, ev.Changes); d != "" {
		t.Errorf("the history event's changes (-want +got): the failed verification is kept with the change\n%s", d)
	}
}

// Without a verifier nothing changes, except that a workload asking for
// verification by annotation is never released unverified.
func TestNoVerifier(t *testing.T) {
	t.Parallel()
	e := verifyEngine(t, verifyImages(), pinDeploy("s", "reg/app:1.0.0", `fluxd.io/tag-all: "semver:*"`)+
		pinDeploy("asks", "reg/app:1.0.0", `fluxd.io/tag-all: "semver:*"`, `fluxd.io/verify: signed`), nil)
	ctx := context.Background()
	p, err := e.Plan(ctx, Spec{Services: []platform.ID{id("s"), id("asks")}, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"s: app:reg/app:1.0.0->reg/app:1.3.0"}, flatten(p)); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	for _, it := range p.Items {
		switch it.Service.Name {
		case "s":
			if v := it.Updates[0].Verification; v.Outcome != "" || v.Detail != "" || v.Digest != "" {
				t.Errorf("a verification without a verifier: %+v", it.Updates[0].Verification)
			}
		case "asks":
			if it.Action != Skip || !strings.Contains(strings.Join(it.Warnings, " "), "fluxd runs without --verify-config") {
				t.Errorf("asks: %s %q %q; want a skip saying fluxd has no --verify-config", it.Action, it.Reason, it.Warnings)
			}
		}
	}
	if _, err := e.Plan(ctx, Spec{Services: []platform.ID{id("asks")}, Image: "reg/app:1.3.0"}); err == nil || !strings.Contains(err.Error(), "without --verify-config") {
		t.Errorf("a release by hand of an annotated workload without a verifier: %v; want it refused", err)
	}
}

// Of many newer images that do not verify, only maxVerifyWalk are
// checked.
func TestVerifyWalkIsBounded(t *testing.T) {
	t.Parallel()
	images := memImages{}
	for i := range 100 {
		images["reg/app"] = append(images["reg/app"], registry.Image{Repository: "reg/app", Tag: fmt.Sprintf("1.%d.0", i), Digest: fmt.Sprintf("sha256:%064x", i)})
	}
	v := &fakeVerifier{repos: map[string]bool{"reg/app": true}}
	e := verifyEngine(t, images, pinDeploy("s", "reg/app:1.0.0", `fluxd.io/tag-all: "semver:*"`), v)
	p, err := e.Plan(context.Background(), Spec{Services: []platform.ID{id("s")}, AllLatest: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Updates() != 0 || v.checks() != maxVerifyWalk {
		t.Errorf("%d updates after %d verifications; want none after %d", p.Updates(), v.checks(), maxVerifyWalk)
	}
	if w := strings.Join(p.Items[0].Warnings, " "); !strings.Contains(w, fmt.Sprintf("stopped after %d", maxVerifyWalk)) {
		t.Errorf("warnings %q do not say the walk stopped", w)
	}
}

// An execution verifies before the git lock and answers from those
// verifications under it: the release goes through, each digest checked
// once.
func TestExecuteVerifiesOutsideTheGitLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(pinDeploy("s", "reg/app:1.0.0", `fluxd.io/tag-all: "semver:*"`, `fluxd.io/automated: "true"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	repo := &recRepo{dirRepo: dirRepo{dir}}
	cluster := &recCluster{workloads: []platform.Workload{{ID: id("s")}}, applied: map[platform.ID]string{}}
	rec := &recRecorder{}
	e := NewEngine(repo, verifyImages(), cluster, rec, slog.New(slog.NewTextHandler(io.Discard, nil)))
	v := &fakeVerifier{repos: map[string]bool{"reg/app": true}, outcomes: map[string]verify.Outcome{dg('3'): verify.Verified}}
	e.SetVerifier(v)
	res, err := e.Execute(context.Background(), "inst", Spec{Services: []platform.ID{id("s")}, AllLatest: true, User: "automator", Automated: true}, history.AutomatedRelease, ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(repo.files["app.yaml"]); !strings.Contains(got, "image: reg/app:1.2.0") {
		t.Errorf("committed:\n%s\nwant reg/app:1.2.0, the newest that verifies", got)
	}
	if !strings.Contains(repo.message, "  app: reg/app:1.0.0 -> reg/app:1.2.0\n    signature: profile signed: verified by key sha256:ci (ci.pub) (at "+dg('3')+")\n") {
		t.Errorf("the commit message does not record the verification:\n%s", repo.message)
	}
	if res.Commit == "" || v.checks() != 2 {
		t.Errorf("commit %q after %d verifications (%v); want one commit, 2 verifications", res.Commit, v.checks(), v.checked)
	}
	// The history row keeps the released image's verification with its
	// change, as data.
	var changes []history.Change
	for _, ev := range rec.events {
		if ev.Type == history.AutomatedRelease {
			changes = append(changes, ev.Changes...)
		}
	}
	want := []history.Change{{Service: "default:deployment/s", Container: "app", From: "reg/app:1.0.0", To: "reg/app:1.2.0",
		Verification: &history.Verification{Outcome: "verified", Profiles: []string{"signed"}, Digest: dg('3'), Detail: "profile signed: verified by key sha256:ci (ci.pub)"}}}
	if d := cmp.Diff(want, changes); d != "" {
		t.Errorf("the history's changes (-want +got)\n%s", d)
	}
}

// The cases, planned through the real registry client and
// verify/cosign against a real registry holding cosign signatures: an
// unsigned newer image is not picked by AllLatest and the warning says
// why; a signed one is; an image signed by another key is refused by
// hand; a tag moved to an unsigned digest after signing is refused; a
// pinned service is written the digest verified.
func TestVerifyWithCosignOverARealRegistry(t *testing.T) {
	reg := regtest.New(100)
	defer reg.Close()
	repo, err := name.NewRepository(reg.Host()+"/team/app", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cosigntest.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	other, err := cosigntest.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	sign := func(s *cosigntest.Signer, d name.Digest) {
		t.Helper()
		if err := s.Sign(d); err != nil {
			t.Fatal(err)
		}
	}
	d100 := pushSignedTestImage(t, repo, "1.0.0")
	sign(ci, d100)
	d110 := pushSignedTestImage(t, repo, "1.1.0")
	sign(ci, d110)
	pushSignedTestImage(t, repo, "1.2.0") // unsigned
	d130 := pushSignedTestImage(t, repo, "1.3.0")
	sign(other, d130) // by a key the profile does not name
	sign(ci, pushSignedTestImage(t, repo, "1.4.0"))
	moved := pushSignedTestImage(t, repo, "1.4.0") // the tag moved to an unsigned image after signing

	images, err := oci.New(oci.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rv := newRealVerifier(t, images, ci, reg.Host()+"/team/*")
	semver := `fluxd.io/tag-all: "semver:*"`
	dir := t.TempDir()
	yaml := pinDeploy("auto", repo.String()+":1.0.0", semver) +
		pinDeploy("pinned", repo.String()+":1.0.0@"+d100.DigestStr(), semver, `fluxd.io/pin-digest: "true"`) +
		pinDeploy("byhand", repo.String()+":1.0.0")
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.SetVerifier(rv)
	ctx := context.Background()

	t.Run("AllLatest skips the unsigned, the wrongly signed and the moved tag, and says why", func(t *testing.T) {
		p, err := e.Plan(ctx, Spec{Services: []platform.ID{id("auto"), id("pinned")}, AllLatest: true})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"auto: app:" + repo.String() + ":1.0.0->" + repo.String() + ":1.1.0",
			"pinned: app:" + repo.String() + ":1.0.0@" + d100.DigestStr() + "->" + repo.String() + ":1.1.0@" + d110.DigestStr(),
		}
		if got := flatten(p); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("updates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, it := range p.Items {
			v := it.Updates[0].Verification
			if v.Outcome != VerifyVerified || v.Digest != d110.DigestStr() || !strings.Contains(v.Detail, ci.ID()) {
				t.Errorf("%s: verification %+v; want verified at %s by %s", it.Service.Name, v, d110.DigestStr(), ci.ID())
			}
			w := strings.Join(it.Warnings, "\n")
			for _, s := range []string{
				":1.4.0", "(unsigned: profile signed: unsigned: no cosign signature for " + moved.DigestStr(),
				repo.String() + ":1.3.0 (failed: profile signed: failed (wrong-key)",
				repo.String() + ":1.2.0 (unsigned",
				"the newest that does",
			} {
				if !strings.Contains(w, s) {
					t.Errorf("%s: no warning says %q; got:\n%s", it.Service.Name, s, w)
				}
			}
		}
	})

	t.Run("a release by hand of an image signed by another key is refused", func(t *testing.T) {
		_, err := e.Plan(ctx, Spec{Services: []platform.ID{id("byhand")}, Image: repo.String() + ":1.3.0", Force: true})
		if err == nil || !strings.Contains(err.Error(), "failed (wrong-key)") {
			t.Errorf("release of 1.3.0: %v; want it refused, wrong key", err)
		}
	})

	t.Run("a tag moved to an unsigned digest after signing is refused", func(t *testing.T) {
		_, err := e.Plan(ctx, Spec{Services: []platform.ID{id("byhand")}, Image: repo.String() + ":1.4.0"})
		if err == nil || !strings.Contains(err.Error(), "unsigned") || !strings.Contains(err.Error(), moved.DigestStr()) {
			t.Errorf("release of the moved 1.4.0: %v; want it refused as unsigned at its new digest", err)
		}
	})

	t.Run("a signed image is released by hand", func(t *testing.T) {
		p, err := e.Plan(ctx, Spec{Services: []platform.ID{id("byhand")}, Image: repo.String() + ":1.1.0"})
		if err != nil {
			t.Fatal(err)
		}
		if u := p.Items[0].Updates; len(u) != 1 || u[0].Verification.Outcome != VerifyVerified {
			t.Errorf("release of 1.1.0: %+v; want it planned, verified", p.Items[0])
		}
	})

	t.Run("a verified digest is not verified again", func(t *testing.T) {
		before := rv.verified.Load()
		if _, err := e.Plan(ctx, Spec{Services: []platform.ID{id("byhand")}, Image: repo.String() + ":1.1.0"}); err != nil {
			t.Fatal(err)
		}
		if n := rv.verified.Load() - before; n != 0 {
			t.Errorf("the verified 1.1.0 was verified %d more times", n)
		}
	})
}
