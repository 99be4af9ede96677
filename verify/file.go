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
	"sync"
	"time"
)

// PublicKey is a cosign public key a profile names, read from its file.
type PublicKey struct {
	// Path is the file, as the config resolves it.
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
}

// Load reads the config at path, checks it (Parse), and reads the key
// files its profiles name (relative to the config's directory), checking
// that each holds a PEM public key and that each trusted root is a JSON
// document. Every problem is reported with the line of the profile that
// names the file, in a *ConfigError.
func Load(path string) (*Loaded, error) {
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
	return l, nil
}

// ReadPublicKey reads a PEM public key (cosign.pub: a PUBLIC KEY block,
// PKIX) from a file.
func ReadPublicKey(path string) (PublicKey, error) {
	data, err := readLimited(path)
	if err != nil {
		return PublicKey{}, fmt.Errorf("reading key: %w", err)
	}
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
	path string

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
func OpenFile(path string) (*File, error) {
	l, err := Load(path)
	if err != nil {
		return nil, err
	}
	return &File{path: path, cur: l, stamp: stampOf(l)}, nil
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
	_, err := f.reload(nil, nil)
	return err
}

// reload is Reload; with want, it installs the config only if the files
// of the config in force (was) still hold the content want stamps once
// the new one is read (none was rewritten while it was read), and
// reports whether it did.
func (f *File) reload(was *Loaded, want *[sha256.Size]byte) (bool, error) {
	l, err := Load(f.path)
	if err == nil && len(l.Profiles) == 0 {
		err = fmt.Errorf("%s: the config now names no profile, which would stop every verification; to turn verification off, restart fluxd without --verify-config", f.path)
	}
	if err == nil && f.check != nil {
		err = f.check(l)
	}
	if err != nil {
		return false, fmt.Errorf("%w; the verification config in force is kept", err)
	}
	if want != nil && stampOf(was) != *want {
		return false, nil
	}
	f.mu.Lock()
	f.cur, f.stamp = l, stampOf(l)
	f.mu.Unlock()
	return true, nil
}

// Watch reloads the config when its file, or a key or trusted root it
// names, changed content and then held it for one interval (a file being
// written is not read half-way), until ctx ends. report is told each
// reload's outcome: nil, or why the new config was refused (the old one
// is kept, and the same content is not tried again).
func (f *File) Watch(ctx context.Context, interval time.Duration, report func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var refused, last [sha256.Size]byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.RLock()
		cur, stamp := f.cur, f.stamp
		f.mu.RUnlock()
		was := &Loaded{Config: cur.Config, Path: f.path}
		now := stampOf(was)
		seen := last
		last = now
		if now == stamp || now == refused || now != seen {
			continue
		}
		done, err := f.reload(was, &now)
		switch {
		case err != nil:
			refused = now
			report(err)
		case done:
			report(nil)
		}
	}
}

// stampOf hashes the content of l's config file and of every key and
// trusted root it names; a file that cannot be read counts as empty.
func stampOf(l *Loaded) [sha256.Size]byte {
	h := sha256.New()
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
