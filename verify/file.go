package verify

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// SecretKeys reads a Kubernetes Secret's data, for a profile's
// keySecrets: fluxd reads it with its Kubernetes client (it needs get on
// that Secret). An error should say why (not found, forbidden).
type SecretKeys func(ctx context.Context, namespace, name string) (map[string][]byte, error)

// SecretPollInterval is how often, at most, Watch reads the Secrets that
// keySecrets name again: a rotated key is taken within about this long.
const SecretPollInterval = 30 * time.Second

// PublicKey is a cosign public key a profile names, read from its file.
type PublicKey struct {
	// Path is the file, as the config resolves it, or, for a key of
	// keySecrets, "secret NAMESPACE/NAME KEY".
	Path string
	// ID is "sha256:" and the hex SHA-256 of the key's DER
	// SubjectPublicKeyInfo: the same for the same key in any file.
	ID  string
	Key crypto.PublicKey
}

// Loaded is a config with the files it names read: what a verifier needs.
type Loaded struct {
	*Config
	// Keys holds each profile's public keys, by profile name.
	Keys map[string][]PublicKey
	// Path is the config file.
	Path string
	// secrets stamps the data of the Secrets keySecrets name, as read.
	secrets [sha256.Size]byte
}

// Load reads the config at path, checks it (Parse), and reads the key
// files its profiles name (relative to the config's directory), checking
// that each holds a PEM public key and that each trusted root is a JSON
// document. Every problem is reported with the line of the profile that
// names the file, in a *ConfigError.
//
// Load does not read the Secrets that keySecrets name (it has no
// Kubernetes client): their profiles hold only their files' keys. It is
// for checking a config; LoadWith reads them.
func Load(path string) (*Loaded, error) {
	return LoadWith(context.Background(), path, nil)
}

// LoadWith is Load that also reads, with secrets, the Secrets that
// keySecrets name: every data key ending in .pub must be a PEM public
// key, and each Secret must hold at least one. A Secret that cannot be
// read is a problem at its profile's line. With nil secrets the Secrets
// are not read, as Load.
func LoadWith(ctx context.Context, path string, secrets SecretKeys) (*Loaded, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, fmt.Errorf("reading the verification config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	l := &Loaded{Config: c, Keys: map[string][]PublicKey{}, Path: path}
	var problems []Problem
	read := map[SecretRef]secretRead{}
	dir := filepath.Dir(path)
	for i := range c.Profiles {
		p := &c.Profiles[i]
		for j, k := range p.Keys {
			if !filepath.IsAbs(k) {
				p.Keys[j] = filepath.Join(dir, k)
			}
			key, err := ReadPublicKey(p.Keys[j])
			if err != nil {
				problems = append(problems, Problem{p.Line, fmt.Sprintf("profile %q: %v", p.Name, err)})
				continue
			}
			l.Keys[p.Name] = append(l.Keys[p.Name], key)
		}
		for _, ref := range p.KeySecrets {
			if secrets == nil {
				break
			}
			r, ok := read[ref]
			if !ok {
				r.data, r.err = secrets(ctx, ref.Namespace, ref.Name)
				read[ref] = r
			}
			keys, err := secretKeys(ref, r)
			if err != nil {
				problems = append(problems, Problem{p.Line, fmt.Sprintf("profile %q: %v", p.Name, err)})
				continue
			}
			l.Keys[p.Name] = append(l.Keys[p.Name], keys...)
		}
		if p.TrustedRoot != "" {
			if !filepath.IsAbs(p.TrustedRoot) {
				p.TrustedRoot = filepath.Join(dir, p.TrustedRoot)
			}
			data, err := readJSON(p.TrustedRoot)
			if err != nil {
				problems = append(problems, Problem{p.Line, fmt.Sprintf("profile %q: trustedRoot: %v", p.Name, err)})
			}
			p.TrustedRootJSON = data
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s: %w", path, &ConfigError{problems})
	}
	l.secrets = stampSecrets(c, read)
	return l, nil
}

// secretKeys reads the public keys of the Secret ref: each data key
// ending in .pub, in key order.
func secretKeys(ref SecretRef, r secretRead) ([]PublicKey, error) {
	data, err := r.data, r.err
	if err != nil {
		return nil, fmt.Errorf("keySecrets %s: reading the Secret: %v (does it exist, in that namespace, and may fluxd's service account get it? see docs/security.md, \"Keys in a Secret\")", ref, err)
	}
	var names []string
	for k := range data {
		if strings.HasSuffix(k, ".pub") {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("keySecrets %s: the Secret holds no key ending in .pub: put the cosign public key under cosign.pub (kubectl create secret generic %s -n %s --from-file=cosign.pub)", ref, ref.Name, ref.Namespace)
	}
	slices.Sort(names)
	var out []PublicKey
	for _, k := range names {
		key, err := parsePublicKey(data[k], fmt.Sprintf("secret %s %s", ref, k))
		if err != nil {
			return nil, err
		}
		out = append(out, key)
	}
	return out, nil
}

// secretRead is a Secret's data as read, or why it could not be.
type secretRead struct {
	data map[string][]byte
	err  error
}

// readSecrets reads every Secret c names, once each.
func readSecrets(ctx context.Context, c *Config, secrets SecretKeys) map[SecretRef]secretRead {
	read := map[SecretRef]secretRead{}
	for _, p := range c.Profiles {
		for _, ref := range p.KeySecrets {
			if _, ok := read[ref]; !ok {
				var r secretRead
				r.data, r.err = secrets(ctx, ref.Namespace, ref.Name)
				read[ref] = r
			}
		}
	}
	return read
}

// stampSecrets hashes the data of every Secret c names, as read; one
// that could not be read counts as a fixed mark (not its error's text,
// which may vary, so that a failure is reported once). Without a Secret
// read, it is zero.
func stampSecrets(c *Config, read map[SecretRef]secretRead) [sha256.Size]byte {
	var out [sha256.Size]byte
	if len(read) == 0 {
		return out
	}
	h := sha256.New()
	for _, p := range c.Profiles {
		for _, ref := range p.KeySecrets {
			r, ok := read[ref]
			if !ok {
				continue
			}
			fmt.Fprintf(h, "%s\n", ref)
			if r.err != nil {
				fmt.Fprintf(h, "unreadable\n")
				continue
			}
			keys := make([]string, 0, len(r.data))
			for k := range r.data {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				fmt.Fprintf(h, "%d:%s %d\n", len(k), k, len(r.data[k]))
				h.Write(r.data[k])
			}
		}
	}
	h.Sum(out[:0])
	return out
}

func namesSecrets(c *Config) bool {
	for _, p := range c.Profiles {
		if len(p.KeySecrets) > 0 {
			return true
		}
	}
	return false
}

// ReadPublicKey reads a PEM public key (cosign.pub: a PUBLIC KEY block,
// PKIX) from a file.
func ReadPublicKey(path string) (PublicKey, error) {
	data, err := readLimited(path)
	if err != nil {
		return PublicKey{}, fmt.Errorf("reading key: %w", err)
	}
	return parsePublicKey(data, path)
}

// parsePublicKey reads a PEM public key from data, which came from path
// (a file, or a Secret's key).
func parsePublicKey(data []byte, path string) (PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return PublicKey{}, fmt.Errorf("key %s holds no PEM block: is it a cosign public key (cosign.pub, not cosign.key)?", path)
	}
	if block.Type != "PUBLIC KEY" {
		return PublicKey{}, fmt.Errorf("key %s holds a %q PEM block, not a PUBLIC KEY: give the public half (cosign.pub)", path, block.Type)
	}
	key, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return PublicKey{}, fmt.Errorf("key %s: %v", path, err)
	}
	sum := sha256.Sum256(block.Bytes)
	return PublicKey{Path: path, ID: "sha256:" + hex.EncodeToString(sum[:]), Key: key}, nil
}

// readJSON reads a trusted root, which must be JSON; what it holds is
// checked when a signature is verified by it (verify/cosign).
func readJSON(path string) ([]byte, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	if !json.Valid(data) {
		return nil, fmt.Errorf("%s is not JSON: a Sigstore trusted root is trusted_root.json (cosign trusted-root create, or the TUF repository's)", path)
	}
	return data, nil
}

func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	const limit = 8 * MaxConfigSize
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if len(data) > limit {
		return nil, fmt.Errorf("%s is more than %d bytes: too big for a config, key or trusted root", path, limit)
	}
	return data, nil
}

// File is the config a daemon verifies by: loaded once, and reloaded when
// asked. A reload that fails keeps the config in force and says why.
type File struct {
	path    string
	secrets SecretKeys
	// secretPoll is SecretPollInterval; tests shorten it.
	secretPoll time.Duration

	mu  sync.RWMutex
	cur *Loaded
	// stamp is the content of the config and the files it names, as
	// last loaded (Watch reloads when it changes).
	stamp [sha256.Size]byte
	// check, when set (SetCheck), is asked of each config read again.
	check func(*Loaded) error
}

// SetCheck makes Reload (and Watch) refuse a config that check refuses,
// as one with a bad line is: the config in force stays. fluxd checks
// each keyless profile's trusted root with it, as it does at start. Set
// it before Watch.
func (f *File) SetCheck(check func(*Loaded) error) { f.check = check }

// OpenFile loads the config at path; a bad one is refused, with every
// problem and its line.
// A config that names keySecrets is refused: that needs OpenFileWith.
func OpenFile(path string) (*File, error) {
	return OpenFileWith(context.Background(), path, nil)
}

// OpenFileWith is OpenFile reading the Secrets that keySecrets name with
// secrets (LoadWith), at load and on each reload. A config naming
// keySecrets with nil secrets is refused.
func OpenFileWith(ctx context.Context, path string, secrets SecretKeys) (*File, error) {
	f := &File{path: path, secrets: secrets, secretPoll: SecretPollInterval}
	l, err := f.load(ctx)
	if err != nil {
		return nil, err
	}
	f.cur, f.stamp = l, stampOf(l, l.secrets)
	return f, nil
}

// load is LoadWith with f's secrets, refusing keySecrets without them.
func (f *File) load(ctx context.Context) (*Loaded, error) {
	l, err := LoadWith(ctx, f.path, f.secrets)
	if err == nil && f.secrets == nil && namesSecrets(l.Config) {
		err = fmt.Errorf("%s: the config names keySecrets, which this program cannot read (it has no Kubernetes client)", f.path)
	}
	return l, err
}

// Current is the config in force.
func (f *File) Current() *Loaded {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.cur
}

// Reload reads the file again. On any problem the config in force stays,
// and the error names each problem with its line. A config that has
// become empty (no profile) is refused too: it would turn verification
// off, which is a restart without --verify-config, not an edit (and an
// editor caught mid-write leaves an empty file for a moment).
func (f *File) Reload() error {
	_, err := f.reload(context.Background(), nil, nil, [sha256.Size]byte{})
	return err
}

// reload is Reload; with want, it installs the config only if the files
// of the config in force (was) still hold the content want stamps once
// the new one is read (none was rewritten while it was read), and
// reports whether it did; secrets is the stamp of the Secrets want was
// made with.
func (f *File) reload(ctx context.Context, was *Loaded, want *[sha256.Size]byte, secrets [sha256.Size]byte) (bool, error) {
	l, err := f.load(ctx)
	if err == nil && len(l.Profiles) == 0 {
		err = fmt.Errorf("%s: the config now names no profile, which would stop every verification; to turn verification off, restart fluxd without --verify-config", f.path)
	}
	if err == nil && f.check != nil {
		err = f.check(l)
	}
	if err != nil {
		return false, fmt.Errorf("%w; the verification config in force is kept", err)
	}
	if want != nil && stampOf(was, secrets) != *want {
		return false, nil
	}
	f.mu.Lock()
	f.cur, f.stamp = l, stampOf(l, l.secrets)
	f.mu.Unlock()
	return true, nil
}

// Watch reloads the config when its file, or a key or trusted root it
// names, changed content and then held it for one interval (a file being
// written is not read half-way), until ctx ends. The Secrets keySecrets
// name are read again every SecretPollInterval at most (or every
// interval, if longer): a Secret changed, gone or no longer readable
// counts as a change. report is told each
// reload's outcome: nil, or why the new config was refused (the old one
// is kept, and the same content is not tried again).
func (f *File) Watch(ctx context.Context, interval time.Duration, report func(error)) {
	secretPoll := max(f.secretPoll, interval)
	t := time.NewTicker(interval)
	defer t.Stop()
	var refused, last [sha256.Size]byte
	var polled, refusedAt time.Time
	var polledFor *Loaded
	var secrets [sha256.Size]byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.RLock()
		cur, stamp := f.cur, f.stamp
		f.mu.RUnlock()
		if cur != polledFor {
			// The Secrets as the config in force read them, until
			// they are read again.
			secrets, polledFor = cur.secrets, cur
		}
		if f.secrets != nil && namesSecrets(cur.Config) && time.Since(polled) >= secretPoll {
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			secrets = stampSecrets(cur.Config, readSecrets(pctx, cur.Config, f.secrets))
			cancel()
			polled = time.Now()
		}
		was := &Loaded{Config: cur.Config, Path: f.path}
		now := stampOf(was, secrets)
		seen := last
		last = now
		// Refused content is not tried again, but for a reader of
		// Secrets: the reload reads them again, and a read that failed
		// there (the API server away a moment) must not hold a rotated
		// key out for good, so such content is tried again each
		// secretPoll.
		retry := f.secrets != nil && time.Since(refusedAt) >= secretPoll
		if now == stamp || (now == refused && !retry) || now != seen {
			continue
		}
		done, err := f.reload(ctx, was, &now, secrets)
		switch {
		case err != nil:
			refused, refusedAt = now, time.Now()
			report(err)
		case done:
			report(nil)
		}
	}
}

// stampOf hashes the content of l's config file and of every key and
// trusted root it names, and secrets (the stamp of its Secrets); a file
// that cannot be read counts as empty.
func stampOf(l *Loaded, secrets [sha256.Size]byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(secrets[:])
	add := func(path string) {
		data, _ := readLimited(path)
		fmt.Fprintf(h, "%s %d\n", path, len(data))
		h.Write(data)
	}
	add(l.Path)
	for _, p := range l.Profiles {
		for _, k := range p.Keys {
			add(k)
		}
		if p.TrustedRoot != "" {
			add(p.TrustedRoot)
		}
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
