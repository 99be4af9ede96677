package verify

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func publicKeyPEM(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// fakeSecrets stands for the API server: Secrets by NAMESPACE/NAME, and
// the reads made.
type fakeSecrets struct {
	mu    sync.Mutex
	data  map[string]map[string][]byte
	reads int
}

func (s *fakeSecrets) set(ref string, data map[string][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if data == nil {
		delete(s.data, ref)
		return
	}
	s.data[ref] = data
}

func (s *fakeSecrets) get(_ context.Context, namespace, name string) (map[string][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	d, ok := s.data[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf(`secrets %q not found`, name)
	}
	return d, nil
}

func TestParseKeySecrets(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte("profiles:\n- name: signed\n  keySecrets: [fluxd/cosign-keys, other/keys.v2]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []SecretRef{{"fluxd", "cosign-keys"}, {"other", "keys.v2"}}
	if got := c.Profiles[0].KeySecrets; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("keySecrets %v, want %v", got, want)
	}
	for config, wants := range map[string][]string{
		"profiles:\n- name: a\n  keySecrets: [cosign-keys]\n": {
			`line 3: keySecrets "cosign-keys": write NAMESPACE/NAME`, `line 2: profile "a" names no signer`},
		"profiles:\n- name: a\n  keySecrets: [a/b/c]\n": {
			`line 3: keySecrets "a/b/c": write NAMESPACE/NAME`, `line 2: profile "a" names no signer`},
		"profiles:\n- name: a\n  keySecrets: [Fluxd/keys]\n": {
			`line 3: keySecrets "Fluxd/keys": "Fluxd" is not a namespace's name`, `line 2: profile "a" names no signer`},
		"profiles:\n- name: a\n  keySecrets: [fluxd/keys_1]\n": {
			`line 3: keySecrets "fluxd/keys_1": "keys_1" is not a Secret's name`, `line 2: profile "a" names no signer`},
		"profiles:\n- name: a\n  keySecrets: [fluxd/k, fluxd/k]\n": {
			`line 3: keySecrets: "fluxd/k" is written twice`},
		"profiles:\n- name: a\n  keySecrets: fluxd/k\n": {
			`line 3: keySecrets should be a list`, `line 2: profile "a" names no signer`},
	} {
		_, err := Parse([]byte(config))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%q: %v, want a *ConfigError", config, err)
			continue
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: the error does not say %q:\n%v", config, w, err)
			}
		}
		if len(ce.Problems) != len(wants) {
			t.Errorf("%q: %d problems, want %d: %v", config, len(ce.Problems), len(wants), err)
		}
	}
}

func TestLoadWithReadsTheSecretsKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writePublicKey(t, filepath.Join(dir, "file.pub"))
	cfg := filepath.Join(dir, "verify.yaml")
	write(t, cfg, "profiles:\n- name: signed\n  keys: [file.pub]\n  keySecrets: [fluxd/cosign-keys]\n- name: only\n  keySecrets: [fluxd/cosign-keys]\n")
	s := &fakeSecrets{data: map[string]map[string][]byte{
		"fluxd/cosign-keys": {"a.pub": publicKeyPEM(t), "b.pub": publicKeyPEM(t), "README": []byte("not a key")},
	}}
	l, err := LoadWith(context.Background(), cfg, s.get)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, k := range l.Keys["signed"] {
		paths = append(paths, k.Path)
	}
	if want := filepath.Join(dir, "file.pub") + ",secret fluxd/cosign-keys a.pub,secret fluxd/cosign-keys b.pub"; strings.Join(paths, ",") != want {
		t.Errorf("keys %q, want %q", strings.Join(paths, ","), want)
	}
	if len(l.Keys["only"]) != 2 {
		t.Errorf("a profile of only keySecrets has %d keys, want 2", len(l.Keys["only"]))
	}
	if s.reads != 1 {
		t.Errorf("the Secret was read %d times for two profiles, want once", s.reads)
	}
	// Load, without a reader of Secrets, checks the rest only.
	if l, err := Load(cfg); err != nil || len(l.Keys["signed"]) != 1 || len(l.Keys["only"]) != 0 {
		t.Errorf("Load = %v, %v; want only the file's key", l, err)
	}
	// ... and the daemon's File refuses to run without one.
	if _, err := OpenFile(cfg); err == nil || !strings.Contains(err.Error(), "names keySecrets") {
		t.Errorf("OpenFile without a reader of Secrets: %v, want it refused", err)
	}
}

func TestLoadWithRefusesABadSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "verify.yaml")
	write(t, cfg, "profiles:\n- name: a\n  keySecrets: [fluxd/missing]\n- name: b\n  keySecrets: [fluxd/nopub]\n- name: c\n  keySecrets: [fluxd/private]\n")
	s := &fakeSecrets{data: map[string]map[string][]byte{
		"fluxd/nopub":   {"cosign.key": []byte("x")},
		"fluxd/private": {"cosign.pub": []byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n")},
	}}
	_, err := OpenFileWith(context.Background(), cfg, s.get)
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 3 {
		t.Fatalf("OpenFileWith: %v, want three problems", err)
	}
	for _, want := range []string{
		`line 2: profile "a": keySecrets fluxd/missing: reading the Secret: secrets "missing" not found (does it exist, in that namespace, and may fluxd's service account get it?`,
		`line 4: profile "b": keySecrets fluxd/nopub: the Secret holds no key ending in .pub`,
		`line 6: profile "c": key secret fluxd/private cosign.pub holds a "ENCRYPTED SIGSTORE PRIVATE KEY" PEM block, not a PUBLIC KEY`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}

// A key rotated in the Secret is read by Watch (no more often than its
// poll interval), changes the profile's fingerprint, and a Secret gone
// keeps the config in force, said once.
func TestWatchReadsARotatedSecret(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "verify.yaml")
	write(t, cfg, "profiles:\n- name: signed\n  keySecrets: [fluxd/cosign-keys]\n")
	s := &fakeSecrets{data: map[string]map[string][]byte{"fluxd/cosign-keys": {"cosign.pub": publicKeyPEM(t)}}}
	f, err := OpenFileWith(context.Background(), cfg, s.get)
	if err != nil {
		t.Fatal(err)
	}
	f.secretPoll = 300 * time.Millisecond
	fingerprint := func() string {
		l := f.Current()
		p, _ := l.Profile("signed")
		return Fingerprint(p, l.Keys["signed"])
	}
	before := fingerprint()
	reports := make(chan error, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	go f.Watch(ctx, 5*time.Millisecond, func(err error) { reports <- err })
	next := func() error {
		t.Helper()
		select {
		case err := <-reports:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("no reload")
			return nil
		}
	}
	s.set("fluxd/cosign-keys", map[string][]byte{"cosign.pub": publicKeyPEM(t)})
	if err := next(); err != nil {
		t.Fatal(err)
	}
	if fingerprint() == before {
		t.Errorf("a key rotated in the Secret left the profile's fingerprint as it was")
	}
	rotated := fingerprint()
	s.set("fluxd/cosign-keys", nil)
	if err := next(); err == nil || !strings.Contains(err.Error(), "keySecrets fluxd/cosign-keys: reading the Secret") || !strings.Contains(err.Error(), "in force is kept") {
		t.Fatalf("a Secret gone: %v; want it said, and the config in force kept", err)
	}
	if fingerprint() != rotated {
		t.Errorf("a Secret gone replaced the config in force")
	}
	// Not again within a poll interval (it is tried again after one: a
	// read that failed may succeed then).
	select {
	case err := <-reports:
		t.Errorf("the same missing Secret was reported again within %v: %v", f.secretPoll, err)
	case <-time.After(100 * time.Millisecond):
	}
	cancel()
	s.mu.Lock()
	reads := s.reads
	s.mu.Unlock()
	// One read per poll, plus one per reload; not one per 5 ms tick.
	if max := 2*int(time.Since(start)/f.secretPoll) + 4; reads > max {
		t.Errorf("the Secret was read %d times in %v, more than %d: polled faster than every %v", reads, time.Since(start), max, f.secretPoll)
	}
}

// A reload whose own read of the Secret failed (the API server away a
// moment, while the poll before it had read a rotated key) is tried again
// after a poll interval: the rotated key is taken, the revoked one not
// trusted for good. Found by review: the refused stamp was the poll's, so
// the same content was never tried again.
func TestWatchRetriesAReloadWhoseSecretReadFailed(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "verify.yaml")
	write(t, cfg, "profiles:\n- name: signed\n  keySecrets: [fluxd/cosign-keys]\n")
	s := &fakeSecrets{data: map[string]map[string][]byte{"fluxd/cosign-keys": {"cosign.pub": publicKeyPEM(t)}}}
	var calls, failAt atomic.Int64
	failAt.Store(-1)
	get := func(ctx context.Context, ns, name string) (map[string][]byte, error) {
		n := calls.Add(1)
		if n == failAt.Load() {
			return nil, errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
		}
		return s.get(ctx, ns, name)
	}
	f, err := OpenFileWith(context.Background(), cfg, get)
	if err != nil {
		t.Fatal(err)
	}
	f.secretPoll = 50 * time.Millisecond
	fp := func() string { l := f.Current(); p, _ := l.Profile("signed"); return Fingerprint(p, l.Keys["signed"]) }
	before := fp()
	reports := make(chan error, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Fail the read right after the poll that sees the rotation: the
	// poll is read n, the reload's read n+1.
	s.set("fluxd/cosign-keys", map[string][]byte{"cosign.pub": publicKeyPEM(t)})
	failAt.Store(calls.Load() + 2)
	go f.Watch(ctx, 5*time.Millisecond, func(err error) { reports <- err })
	select {
	case err := <-reports:
		t.Logf("first report: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no report")
	}
	time.Sleep(2 * time.Second) // 40 polls, the API answering
	if fp() == before {
		t.Errorf("the rotated key was never taken: the old (revoked) key is still trusted %v after the API answered again (reads %d)", 2*time.Second, calls.Load())
	}
}
