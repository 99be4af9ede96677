package release

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/cosigntest"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/verify"
	"github.com/fluxd/fluxd/verify/cosign"
	"github.com/fluxd/fluxd/verify/storecache"
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
	return newRealVerifierWith(t, images, signer, match, nil, nil)
}

// newRealVerifierWith is newRealVerifier with results kept in store too
// (nil: memory only), on clock now (nil: time.Now).
func newRealVerifierWith(t testing.TB, images *oci.Client, signer *cosigntest.Signer, match string, store verify.Cache, now func() time.Time) realVerifier {
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
	v := countingVerifier{cosign.New(cosign.Config{Transport: images.SignatureTransport(), Keychain: images.Keychain()}), n}
	return realVerifier{verify.NewGate(file, verify.Cached{Verifier: v, Memory: &verify.MemoryCache{}, Store: store, Now: now}), n}
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

// The cost of verification in a 2,000-tag repository under a semver
// policy, the two newest unsigned: an automated plan verifies the three
// candidates it would release, newest first, and stops at the first that
// verifies. The next plan verifies nothing: the verified digest is final, and the
// unsigned ones were checked less than verify.DefaultRecheck ago. A
// second replica sharing the SQLite file verifies nothing either: it
// reads the results the first kept.
func TestVerifyCostOf2000Tags(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 2,000 tags")
	}
	c := newCostRig(t)
	a := c.replica(t)
	first := c.plan(t, a)
	second := c.plan(t, a)
	b := c.replica(t)
	other := c.plan(t, b)
	t.Logf("first plan: %+v; the next: %+v; a second replica's first: %+v", first, second, other)
	if first.verifications != 3 || second.verifications != 0 || other.verifications != 0 {
		t.Errorf("%d, %d and %d verifications; want 3, then 0, and 0 on the second replica", first.verifications, second.verifications, other.verifications)
	}
	// Past the recheck interval the two unsigned are asked again (a
	// signature may have been pushed since); the verified one is not.
	c.now = c.now.Add(verify.DefaultRecheck)
	if later := c.plan(t, b); later.verifications != 2 {
		t.Errorf("a plan after the recheck interval made %d verifications; want 2, the unsigned", later.verifications)
	}
	// A person's plan (a release by hand, its dry run) asks again about
	// the unsigned at once: one signed a moment ago is released now.
	if person := c.planAs(t, b, false); person.verifications != 2 {
		t.Errorf("a person's plan made %d verifications; want 2, the unsigned asked again", person.verifications)
	}
}

// BenchmarkVerify2000Tags reports, per plan of one automated container
// over a 2,000-tag semver repository whose two newest tags are unsigned,
// the verifications made and the registry requests (the tag list, the
// digests of the candidates, the signature lookups): a replica's first
// plan (an empty store), its next plans, and the first plan of another
// replica sharing the first one's SQLite store.
func BenchmarkVerify2000Tags(b *testing.B) {
	c := newCostRig(b)
	report := func(b *testing.B, sum cost) {
		b.ReportMetric(float64(sum.verifications)/float64(b.N), "verifications/op")
		b.ReportMetric(float64(sum.requests)/float64(b.N), "requests/op")
	}
	b.Run("first", func(b *testing.B) {
		var sum cost
		for range b.N {
			b.StopTimer()
			c.fresh(b)
			r := c.replica(b)
			b.StartTimer()
			sum = sum.add(c.plan(b, r))
		}
		report(b, sum)
	})
	b.Run("second", func(b *testing.B) {
		r := c.replica(b)
		c.plan(b, r)
		b.ResetTimer()
		var sum cost
		for range b.N {
			sum = sum.add(c.plan(b, r))
		}
		report(b, sum)
	})
	b.Run("replica", func(b *testing.B) {
		c.plan(b, c.replica(b))
		var sum cost
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			r := c.replica(b)
			b.StartTimer()
			sum = sum.add(c.plan(b, r))
		}
		report(b, sum)
	})
}

// cost is what plans cost: verifications that reached the registry, and
// registry requests.
type cost struct {
	verifications, requests int64
	// The requests by kind: tag list pages, manifest GETs and HEADs, the
	// rest (the /v2/ ping).
	lists, manifests, heads, other int64
}

func (c cost) add(d cost) cost {
	return cost{c.verifications + d.verifications, c.requests + d.requests, c.lists + d.lists, c.manifests + d.manifests, c.heads + d.heads, c.other + d.other}
}

// costRig is a 2,000-tag repository in a real in-process registry, two
// of its newest tags signed, the two newest unsigned, a service under a
// semver policy requiring a signature, and the SQLite store its replicas
// share.
type costRig struct {
	reg        *regtest.Registry
	ci         *cosigntest.Signer
	repository string
	dir, db    string
	now        time.Time
	// tmp holds the store files, stores counts them.
	tmp    string
	stores int
}

func newCostRig(tb testing.TB) *costRig {
	reg := regtest.New(1000)
	tb.Cleanup(reg.Close)
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
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(pinDeploy("s", repository+":"+regtest.Version(0), `fluxd.io/tag-all: "semver:*"`, `fluxd.io/automated: "true"`)), 0o644); err != nil {
		tb.Fatal(err)
	}
	c := &costRig{reg: reg, ci: ci, repository: repository, dir: dir, now: time.Now(), tmp: tb.TempDir()}
	c.fresh(tb)
	return c
}

// fresh starts a new, empty store file for the replicas after.
func (c *costRig) fresh(testing.TB) {
	c.stores++
	c.db = filepath.Join(c.tmp, fmt.Sprintf("history-%d.db", c.stores))
}

// costReplica is one fluxd: its registry client, verifier and engine,
// over the rig's store file.
type costReplica struct {
	e  *Engine
	rv realVerifier
}

// replica starts a fluxd as cmd/fluxd builds it: the registry client
// and the verification results kept in the store file (opened anew, as
// another process opens it), the memory caches empty.
func (c *costRig) replica(tb testing.TB) costReplica {
	store, err := sqlite.Open(context.Background(), c.db)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	images, err := oci.New(oci.Config{ListMin: time.Hour, ListMax: time.Hour, Cache: store})
	if err != nil {
		tb.Fatal(err)
	}
	rv := newRealVerifierWith(tb, images, c.ci, c.reg.Host()+"/team/*", storecache.Cache{Store: store}, func() time.Time { return c.now })
	e := NewEngine(dirRepo{c.dir}, images, noCluster{}, noRecorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.SetVerifier(rv)
	return costReplica{e, rv}
}

// plan plans the service's AllLatest update on r and returns its cost.
func (c *costRig) plan(tb testing.TB, r costReplica) cost {
	return c.planAs(tb, r, true)
}

// planAs plans as the automator does (automated), or as a person does.
func (c *costRig) planAs(tb testing.TB, r costReplica, automated bool) cost {
	c.reg.Reset()
	before := r.rv.verified.Load()
	p, err := r.e.Plan(context.Background(), Spec{Services: []platform.ID{id("s")}, AllLatest: true, Automated: automated})
	if err != nil {
		tb.Fatal(err)
	}
	want := "s: app:" + c.repository + ":0.0.0->" + c.repository + ":" + regtest.Version(1997)
	if got := flatten(p); len(got) != 1 || got[0] != want {
		tb.Fatalf("plan %v, want %s", got, want)
	}
	return cost{r.rv.verified.Load() - before, c.reg.Requests() + c.reg.Other.Load(),
		c.reg.Lists.Load(), c.reg.Manifests.Load(), c.reg.Heads.Load(), c.reg.Other.Load()}
}
