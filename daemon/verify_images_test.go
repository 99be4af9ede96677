package daemon

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/verify"
)

// listVerifier requires profile "signed" of repository want; digests in
// signed verify, "sha256:bad" fails, the rest are unsigned. It counts
// the digests checked.
type listVerifier struct {
	want   string
	signed map[string]bool
	mu     sync.Mutex
	seen   []string
}

func (v *listVerifier) Required(_ map[string]string, _, repository string) ([]string, error) {
	if repository == v.want {
		return []string{"signed"}, nil
	}
	return nil, nil
}

func (v *listVerifier) Check(_ context.Context, _ map[string]string, _, _, digest string) (verify.Verdict, error) {
	v.mu.Lock()
	v.seen = append(v.seen, digest)
	v.mu.Unlock()
	r := verify.Result{Digest: digest, Profile: "signed", Outcome: verify.Unsigned, Detail: "no cosign signature for " + digest}
	switch {
	case v.signed[digest]:
		r.Outcome, r.Signer, r.Detail = verify.Verified, "key sha256:ci (ci.pub)", ""
	case digest == "sha256:bad":
		r.Outcome, r.Reason, r.Detail = verify.Failed, verify.WrongKey, "1 signature(s), none by the key(s) of profile \"signed\""
	}
	return verify.Verdict{Digest: digest, Results: []verify.Result{r}}, nil
}

// engineReleaser is policyReleaser with a real release.Engine's
// VerifyImage, over a fake verifier.
type engineReleaser struct {
	policyReleaser
	*release.Engine
}

func (r engineReleaser) Manifests(ctx context.Context) (string, *gitrepo.Manifests, error) {
	return r.policyReleaser.Manifests(ctx)
}

type listedImages []registry.Image

func (l listedImages) Images(context.Context, string) ([]registry.Image, error) { return l, nil }

func verifyDaemon(t *testing.T, repo string, imgs listedImages, v release.Verifier) *Daemon {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	id := platform.ID{Namespace: "default", Kind: "deployment", Name: "app"}
	ctr := platform.Container{Name: "app", Image: repo + ":1.0.0"}
	def := &gitrepo.Definition{ID: id, File: "app.yaml", Containers: []gitrepo.Container{{Name: "app", Image: ctr.Image}},
		Annotations: map[string]string{"fluxd.io/tag-all": "semver:*"}}
	e := release.NewEngine(nil, nil, nil, nil, log)
	if v != nil {
		e.SetVerifier(v)
	}
	return New(Config{}, Deps{Cluster: &stubCluster{workloads: []platform.Workload{{ID: id, Containers: []platform.Container{ctr}}}},
		Releaser: engineReleaser{policyReleaser{def: def}, e}, Images: imgs}, log)
}

func versions(repo string) listedImages {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var out listedImages
	for i, tag := range []string{"1.5.0", "1.4.0", "1.3.0", "1.2.0", "1.1.0", "1.0.0"} {
		out = append(out, registry.Image{Repository: repo, Tag: tag, Digest: "sha256:" + tag, CreatedAt: t0.Add(-time.Duration(i) * time.Hour)})
	}
	out[1].Digest = "sha256:bad"
	out[2].Digest = "" // not read yet
	return out
}

// list-images shows each image's verification where a profile applies,
// and verifies only the images shown: the page and the running one.
func TestListImagesShowsVerificationOfTheImagesShown(t *testing.T) {
	const repo = "registry.example/team/app"
	v := &listVerifier{want: repo, signed: map[string]bool{"sha256:1.5.0": true, "sha256:1.0.0": true}}
	d := verifyDaemon(t, repo, versions(repo), v)
	_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 3})
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	got := cis[0].Verified
	for tag, want := range map[string]string{"1.5.0": release.VerifyVerified, "1.4.0": release.VerifyFailed, "1.3.0": release.VerifyUnchecked, "1.0.0": release.VerifyVerified} {
		if got[tag].Outcome != want {
			t.Errorf("%s: outcome %q (%s), want %s", tag, got[tag].Outcome, got[tag], want)
		}
	}
	if s := got["1.5.0"].String(); !strings.Contains(s, "sha256:ci") {
		t.Errorf("a verified image does not say by whom: %q", s)
	}
	if s := got["1.4.0"].String(); !strings.Contains(s, "none by the key") {
		t.Errorf("a failed image does not say why: %q", s)
	}
	if _, ok := got["1.2.0"]; ok {
		t.Errorf("1.2.0 is not on the page but was verified: %v", got)
	}
	slices.Sort(v.seen)
	if want := []string{"sha256:1.0.0", "sha256:1.5.0", "sha256:bad"}; !slices.Equal(v.seen, want) {
		t.Errorf("checked %v, want only the shown images with a digest %v", v.seen, want)
	}
	// The proto carries it per image; an image off the page has none.
	p := serviceImagesToProto(Service{}, cis, 0, 3)
	for _, img := range p.GetContainers()[0].GetAvailable() {
		if img.GetVerification().GetOutcome() != got[img.GetTag()].Outcome {
			t.Errorf("%s: proto says %q, want %q", img.GetTag(), img.GetVerification().GetOutcome(), got[img.GetTag()].Outcome)
		}
	}
}

// Where no profile applies to the repository, or fluxd verifies nothing,
// list-images shows no verification and checks nothing.
func TestListImagesVerifiesNothingWhereNoProfileApplies(t *testing.T) {
	const repo = "registry.example/team/app"
	v := &listVerifier{want: "registry.example/other"}
	for name, rv := range map[string]release.Verifier{"other repository": v, "no verifier": nil} {
		d := verifyDaemon(t, repo, versions(repo), rv)
		_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 3})
		if err != nil || len(cis) != 1 {
			t.Fatalf("%s: %v %v", name, cis, err)
		}
		if cis[0].Verified != nil {
			t.Errorf("%s: verification shown where none applies: %v", name, cis[0].Verified)
		}
	}
	if len(v.seen) != 0 {
		t.Errorf("checked %v where no profile applies", v.seen)
	}
}

// cosign's own tags (a signature beside an image) are never verified:
// they are not images to run.
func TestListImagesDoesNotVerifyCosignArtifacts(t *testing.T) {
	const repo = "registry.example/team/app"
	sig := "sha256-" + strings.Repeat("f", 64) + ".sig"
	imgs := append(listedImages{{Repository: repo, Tag: sig, Digest: "sha256:sig", CreatedAt: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)}}, versions(repo)...)
	v := &listVerifier{want: repo, signed: map[string]bool{"sha256:1.0.0": true}}
	d := verifyDaemon(t, repo, imgs, v)
	_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 1})
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	if vr, ok := cis[0].Verified[sig]; ok || slices.Contains(v.seen, "sha256:sig") {
		t.Errorf("the signature tag was verified: %v (checked %v)", vr, v.seen)
	}
	if cis[0].Verified["1.0.0"].Outcome != release.VerifyVerified {
		t.Errorf("the running image's verification: %v", cis[0].Verified)
	}
}

// slowVerifier answers only when its context ends, as a registry that
// does not answer.
type slowVerifier struct{ listVerifier }

func (v *slowVerifier) Check(ctx context.Context, _ map[string]string, _, _, _ string) (verify.Verdict, error) {
	<-ctx.Done()
	return verify.Verdict{}, ctx.Err()
}

// A registry that does not answer the signature lookups does not hold
// list-images up: past verifyWait the images show as not checked.
func TestListImagesVerificationIsBounded(t *testing.T) {
	defer func(w time.Duration) { verifyWait = w }(verifyWait)
	verifyWait = 100 * time.Millisecond
	const repo = "registry.example/team/app"
	d := verifyDaemon(t, repo, versions(repo), &slowVerifier{listVerifier{want: repo}})
	start := time.Now()
	_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 3})
	if err != nil || len(cis) != 1 {
		t.Fatalf("%v %v", cis, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("list-images took %v with a registry that does not answer", took)
	}
	for _, tag := range []string{"1.5.0", "1.0.0"} {
		if v := cis[0].Verified[tag]; v.Outcome != release.VerifyUnchecked || !strings.Contains(v.Detail, "not verified within") {
			t.Errorf("%s: %+v, want unchecked, not verified within the wait", tag, v)
		}
	}
}
