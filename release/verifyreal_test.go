package release

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/internal/cosigntest"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/verify"
	"github.com/fluxd/fluxd/verify/cosign"
)

// realVerifier is what fluxd --verify-config builds: verify.Gate over the
// config file, cosign's verifier through the registry client's transport,
// results cached in memory. It counts the verifications that reach the
// registry.
type realVerifier struct {
	*verify.Gate
	verified *atomic.Int64
}

type countingVerifier struct {
	verify.Verifier
	n *atomic.Int64
}

func (c countingVerifier) Verify(ctx context.Context, repository, digest string, p *verify.Profile, keys []verify.PublicKey) (verify.Result, error) {
	c.n.Add(1)
	return c.Verifier.Verify(ctx, repository, digest, p, keys)
}

// newRealVerifier writes a config requiring profile "signed" (signer's
// public key) of every repository under match, and builds the verifier.
func newRealVerifier(t testing.TB, images *oci.Client, signer *cosigntest.Signer, match string) realVerifier {
	t.Helper()
	dir := t.TempDir()
	if err := signer.WritePublicKey(filepath.Join(dir, "cosign.pub")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "verify.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n- name: signed\n  keys: [cosign.pub]\nrepositories:\n- match: "+match+"\n  profile: signed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := verify.OpenFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &atomic.Int64{}
	v := countingVerifier{cosign.New(cosign.Config{Transport: images.Transport(), Keychain: images.Keychain()}), n}
	return realVerifier{verify.NewGate(file, verify.Cached{Verifier: v, Cache: &verify.MemoryCache{}}), n}
}

// pushImage pushes a new random image under tag.
func pushSignedTestImage(t testing.TB, repo name.Repository, tag string) name.Digest {
	t.Helper()
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(tag), img); err != nil {
		t.Fatal(err)
	}
	h, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return repo.Digest(h.String())
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

// The cost of verification in a 2,000-tag repository under a semver
// policy, the two newest unsigned: a plan verifies the three candidates it
// would release, newest first, and stops at the first that verifies. The
// next plan verifies only the two unsigned again (a verified digest is
// cached; an unsigned one may be signed any moment).
func TestVerifyCostOf2000Tags(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 2,000 tags")
	}
	verifications, requests, again, againRequests := verifyCost(t, 1)
	t.Logf("first plan: %d verifications, %d registry requests; the next: %d verifications, %d requests", verifications, requests, again, againRequests)
	if verifications != 3 || again != 2 {
		t.Errorf("%d and %d verifications; want 3, then 2", verifications, again)
	}
}

// BenchmarkVerify2000Tags reports, per plan of one automated container
// over a 2,000-tag semver repository whose two newest tags are unsigned,
// the verifications made and the registry requests (the tag list, the
// digests of the candidates, the signature lookups).
func BenchmarkVerify2000Tags(b *testing.B) {
	verifyCost(b, b.N)
}

// verifyCost plans rounds times (after a first plan) and returns the
// first plan's verifications and registry requests, and the later
// plans' per plan.
func verifyCost(tb testing.TB, rounds int) (first, firstRequests, later, laterRequests int64) {
	reg := regtest.New(1000)
	defer reg.Close()
	ctx := context.Background()
	repository := reg.Host() + "/team/app"
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := reg.PushVersions(ctx, repository, 0, 2000, t0); err != nil {
		tb.Fatal(err)
	}
	repo, err := name.NewRepository(repository, name.Insecure)
	if err != nil {
		tb.Fatal(err)
	}
	ci, err := cosigntest.NewSigner()
	if err != nil {
		tb.Fatal(err)
	}
	for _, i := range []int{1997, 1996} {
		desc, err := remote.Head(repo.Tag(regtest.Version(i)))
		if err != nil {
			tb.Fatal(err)
		}
		if err := ci.Sign(repo.Digest(desc.Digest.String())); err != nil {
			tb.Fatal(err)
		}
	}
	// 1998 and 1999 are new, and unsigned.
	for _, i := range []int{1998, 1999} {
		pushSignedTestImage(tb, repo, regtest.Version(i))
	}
	images, err := oci.New(oci.Config{ListMin: time.Hour, ListMax: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	rv := newRealVerifier(tb, images, ci, reg.Host()+"/team/*")
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(pinDeploy("s", repository+":"+regtest.Version(0), `fluxd.io/tag-all: "semver:*"`)), 0o644); err != nil {
		tb.Fatal(err)
	}
	e := NewEngine(dirRepo{dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.SetVerifier(rv)
	spec := Spec{Services: []platform.ID{id("s")}, AllLatest: true}
	want := "s: app:" + repository + ":0.0.0->" + repository + ":" + regtest.Version(1997)
	plan := func() {
		p, err := e.Plan(ctx, spec)
		if err != nil {
			tb.Fatal(err)
		}
		if got := flatten(p); len(got) != 1 || got[0] != want {
			tb.Fatalf("plan %v, want %s", got, want)
		}
	}
	reg.Reset()
	plan()
	first, firstRequests = rv.verified.Load(), reg.Requests()+reg.Other.Load()
	if b, ok := tb.(*testing.B); ok {
		b.ResetTimer()
	}
	reg.Reset()
	before := rv.verified.Load()
	for range rounds {
		plan()
	}
	later = (rv.verified.Load() - before) / int64(rounds)
	laterRequests = (reg.Requests() + reg.Other.Load()) / int64(rounds)
	if b, ok := tb.(*testing.B); ok {
		b.ReportMetric(float64(later), "verifications/op")
		b.ReportMetric(float64(laterRequests), "requests/op")
		b.ReportMetric(float64(first), "first-verifications")
		b.ReportMetric(float64(firstRequests), "first-requests")
	}
	return first, firstRequests, later, laterRequests
}
