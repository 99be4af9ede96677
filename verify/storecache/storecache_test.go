package storecache

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/postgres"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/cosigntest"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/verify"
	"github.com/fluxd/fluxd/verify/cosign"
)

func TestMain(m *testing.M) { os.Exit(pgserver.RunTests(m)) }

// rig is a real registry, an image repository in it, a cosign key, a
// verification config requiring that key of the repository, and a clock
// the replicas share.
type rig struct {
	repo name.Repository
	ci   *cosigntest.Signer
	cfg  string
	now  time.Time
}

func newRig(t *testing.T) *rig {
	t.Helper()
	srv := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://")+"/team/app", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cosigntest.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	r := &rig{repo: repo, ci: ci, cfg: filepath.Join(dir, "verify.yaml"), now: time.Now()}
	r.key(t, ci)
	if err := os.WriteFile(r.cfg, []byte("profiles:\n- name: signed\n  keys: [cosign.pub]\nrepositories:\n- match: "+repo.String()+"\n  profile: signed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

// key makes s the key the config names (cosign.pub rewritten: a key
// rotated).
func (r *rig) key(t *testing.T, s *cosigntest.Signer) {
	t.Helper()
	if err := s.WritePublicKey(filepath.Join(filepath.Dir(r.cfg), "cosign.pub")); err != nil {
		t.Fatal(err)
	}
}

// push pushes a new image under tag and returns its digest.
func (r *rig) push(t *testing.T, tag string) name.Digest {
	t.Helper()
	img, err := random.Image(128, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r.repo.Tag(tag), img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return r.repo.Digest(d.String())
}

// replica is one fluxd's verification: the gate over the config as it
// is now, cosign's verifier (counted), its own memory cache, and the
// store.
type replica struct {
	gate     *verify.Gate
	verified *atomic.Int64
}

type counting struct {
	verify.Verifier
	n *atomic.Int64
}

func (c counting) Verify(ctx context.Context, repository, digest string, p *verify.Profile, keys []verify.PublicKey) (verify.Result, error) {
	c.n.Add(1)
	return c.Verifier.Verify(ctx, repository, digest, p, keys)
}

func (r *rig) replica(t *testing.T, store history.VerificationResults) replica {
	t.Helper()
	file, err := verify.OpenFile(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := &atomic.Int64{}
	c := verify.Cached{Verifier: counting{cosign.New(cosign.Config{}), n}, Memory: &verify.MemoryCache{}, Store: Cache{Store: store},
		Now: func() time.Time { return r.now }}
	return replica{verify.NewGate(file, c), n}
}

// check verifies d on rep, and says how many verifications reached the
// registry.
func (r *rig) check(t *testing.T, rep replica, d name.Digest) (verify.Verdict, int64) {
	t.Helper()
	before := rep.verified.Load()
	v, err := rep.gate.Check(context.Background(), nil, "app", r.repo.String(), d.DigestStr())
	if err != nil {
		t.Fatalf("checking %s: %v", d, err)
	}
	return v, rep.verified.Load() - before
}

// stores opens two handles on one database, as two replicas do: the
// same SQLite file, or the same PostgreSQL database.
var stores = map[string]func(t *testing.T) (history.VerificationResults, history.VerificationResults){
	"sqlite": func(t *testing.T) (history.VerificationResults, history.VerificationResults) {
		path := filepath.Join(t.TempDir(), "history.db")
		open := func() history.VerificationResults {
			s, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open()
	},
	"postgres": func(t *testing.T) (history.VerificationResults, history.VerificationResults) {
		url, srv := pgserver.Database(t)
		open := func() history.VerificationResults {
			s, err := postgres.Open(context.Background(), postgres.Config{URL: url, Password: srv.Password})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		return open(), open()
	},
}

func eachStore(t *testing.T, test func(t *testing.T, a, b history.VerificationResults)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			if kind == "postgres" && testing.Short() {
				t.Skip("starts a PostgreSQL server; skipped under -short")
			}
			a, b := stores[kind](t)
			test(t, a, b)
		})
	}
}

// Two replicas sharing a store: a digest one verified is not verified by
// the other, which answers what the first found, signer included.
func TestReplicasDoNotVerifyADigestTwice(t *testing.T) {
	eachStore(t, func(t *testing.T, sa, sb history.VerificationResults) {
		r := newRig(t)
		d := r.push(t, "1.0.0")
		if err := r.ci.Sign(d); err != nil {
			t.Fatal(err)
		}
		a, b := r.replica(t, sa), r.replica(t, sb)
		va, n := r.check(t, a, d)
		if va.Outcome() != verify.Verified || n != 1 {
			t.Fatalf("replica a: %s after %d verifications; want verified after 1", va, n)
		}
		// Long after: a verified digest is final.
		r.now = r.now.Add(24 * time.Hour)
		vb, n := r.check(t, b, d)
		if vb.Outcome() != verify.Verified || n != 0 {
			t.Errorf("replica b: %s after %d verifications; want verified, from the store, after none", vb, n)
		}
		if vb.String() != va.String() || !strings.Contains(vb.String(), r.ci.ID()) {
			t.Errorf("replica b says %q; want what a found, %q, naming %s", vb, va, r.ci.ID())
		}
		// A restarted replica a (an empty memory): the store answers.
		if v, n := r.check(t, r.replica(t, sa), d); v.Outcome() != verify.Verified || n != 0 {
			t.Errorf("replica a restarted: %s after %d verifications; want verified after none", v, n)
		}
	})
}

// A key rotated under the same profile and file: the profile's
// fingerprint changes, so a digest verified under the old key is checked
// again, and fails (signed by the old key only); the old key's verdict
// is not served.
func TestChangedKeyIsVerifiedAgain(t *testing.T) {
	eachStore(t, func(t *testing.T, sa, sb history.VerificationResults) {
		r := newRig(t)
		d := r.push(t, "1.0.0")
		if err := r.ci.Sign(d); err != nil {
			t.Fatal(err)
		}
		if v, n := r.check(t, r.replica(t, sa), d); v.Outcome() != verify.Verified || n != 1 {
			t.Fatalf("under the first key: %s after %d verifications", v, n)
		}
		next, err := cosigntest.NewSigner()
		if err != nil {
			t.Fatal(err)
		}
		r.key(t, next)
		b := r.replica(t, sb)
		v, n := r.check(t, b, d)
		if n != 1 || v.Outcome() != verify.Failed || !strings.Contains(v.String(), "wrong-key") {
			t.Errorf("under a rotated key: %s after %d verifications; want failed (wrong-key) after 1", v, n)
		}
		// Signed by the new key too: verified once the recheck interval
		// has passed.
		if err := next.Sign(d); err != nil {
			t.Fatal(err)
		}
		r.now = r.now.Add(verify.DefaultRecheck)
		if v, n := r.check(t, b, d); v.Outcome() != verify.Verified || n != 1 || !strings.Contains(v.String(), next.ID()) {
			t.Errorf("signed by the new key: %s after %d verifications; want verified by %s after 1", v, n, next.ID())
		}
	})
}

// An image pushed before its signature: unsigned at first, and kept so
// for verify.DefaultRecheck only (by both replicas: the store's checked-at
// holds for the other too); once signed, it verifies after the interval.
func TestUnsignedSignedLaterVerifiesAfterTheInterval(t *testing.T) {
	eachStore(t, func(t *testing.T, sa, sb history.VerificationResults) {
		r := newRig(t)
		d := r.push(t, "1.0.0")
		a, b := r.replica(t, sa), r.replica(t, sb)
		if v, n := r.check(t, a, d); v.Outcome() != verify.Unsigned || n != 1 {
			t.Fatalf("before it is signed: %s after %d verifications; want unsigned after 1", v, n)
		}
		if v, n := r.check(t, b, d); v.Outcome() != verify.Unsigned || n != 0 {
			t.Errorf("replica b at once: %s after %d verifications; want the unsigned a found, no request", v, n)
		}
		if err := r.ci.Sign(d); err != nil {
			t.Fatal(err)
		}
		r.now = r.now.Add(verify.DefaultRecheck - time.Second)
		if v, n := r.check(t, a, d); v.Outcome() != verify.Unsigned || n != 0 {
			t.Errorf("within the interval: %s after %d verifications; want unsigned still, no request", v, n)
		}
		r.now = r.now.Add(time.Second)
		if v, n := r.check(t, b, d); v.Outcome() != verify.Verified || n != 1 {
			t.Errorf("replica b after the interval: %s after %d verifications; want verified after 1", v, n)
		}
		// Replica a's memory holds the unsigned, stale now; the store
		// holds b's verified result, which a takes without a request.
		if v, n := r.check(t, a, d); v.Outcome() != verify.Verified || n != 0 {
			t.Errorf("replica a after b verified: %s after %d verifications; want verified from the store", v, n)
		}
	})
}
