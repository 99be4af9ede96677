package oci

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/docker/cli/cli/config/configfile"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Credentials are registry credentials in docker config.json format, with
// where they came from and which repositories they may be offered to.
type Credentials struct {
	// Source names them in messages, never their content:
	// "--registry-secret ns/name", "image pull secret ns/name".
	Source string
	// DockerConfig is a config.json document ({"auths": {HOST: ...}}).
	DockerConfig []byte
	// Global offers them for every repository of their registries:
	// credentials the operator named (--registry-secret,
	// --registry-credentials).
	Global bool
	// Images are the image references (or repositories) whose
	// repositories they are offered for when not Global: a workload's
	// pull secret serves the images the workloads that use it run, and no
	// others, so a secret of one namespace never reads another
	// namespace's images.
	Images []string
}

// SecretSource returns credentials, such as the image pull secrets of the
// cluster's workloads.
type SecretSource func(ctx context.Context) ([]Credentials, error)

// SecretKeychain resolves credentials from a SecretSource, re-reading it
// at most once per TTL, and at once after Refresh, which the client calls
// when a registry answers 401, before it reports the error.
type SecretKeychain struct {
	src SecretSource
	ttl time.Duration

	mu     sync.Mutex
	creds  []parsedCredentials
	read   bool
	readAt time.Time
}

// parsedCredentials are Credentials read, with their repositories
// normalised (index.docker.io/library/nginx for nginx).
type parsedCredentials struct {
	source string
	kc     fileKeychain
	global bool
	repos  map[string]bool
}

var _ sourcedKeychain = (*SecretKeychain)(nil)

// NewSecretKeychain returns a keychain over src.
func NewSecretKeychain(src SecretSource, ttl time.Duration) *SecretKeychain {
	return &SecretKeychain{src: src, ttl: ttl}
}

// Refresh makes the next Resolve read the source again.
func (k *SecretKeychain) Refresh() {
	k.mu.Lock()
	k.read = false
	k.mu.Unlock()
}

// Resolve finds credentials for res in the secrets; anonymous if none.
func (k *SecretKeychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	a, _, err := k.resolveSource(res, nil)
	return a, err
}

// resolveSource is Resolve, also naming the credentials' source. The
// first credentials, in the source's order, that apply to the repository
// and have an entry for its registry win.
func (k *SecretKeychain) resolveSource(res authn.Resource, skip func(authn.Authenticator) bool) (authn.Authenticator, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.read || time.Since(k.readAt) > k.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		creds, err := k.src(ctx)
		cancel()
		if err != nil {
			return nil, "", fmt.Errorf("reading registry credentials: %w", err)
		}
		k.creds, k.read, k.readAt = parseCredentialsList(creds), true, time.Now()
	}
	repo := repositoryOf(res)
	for _, c := range k.creds {
		if !c.global && (repo == "" || !c.repos[repo]) {
			continue
		}
		a, err := c.kc.Resolve(res)
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", c.source, err)
		}
		if a != authn.Anonymous && (skip == nil || !skip(a)) {
			return a, c.source, nil
		}
	}
	return authn.Anonymous, "", nil
}

func parseCredentialsList(creds []Credentials) []parsedCredentials {
	out := make([]parsedCredentials, 0, len(creds))
	for _, c := range creds {
		cf, err := parseDockerConfig(c.Source, c.DockerConfig)
		if err != nil {
			continue // one malformed secret must not hide the others
		}
		p := parsedCredentials{source: c.Source, kc: fileKeychain{cf}, global: c.Global, repos: map[string]bool{}}
		for _, img := range c.Images {
			if r := normalRepository(img); r != "" {
				p.repos[r] = true
			}
		}
		out = append(out, p)
	}
	return out
}

// normalRepository returns the full name of an image reference's
// repository, or "" if it does not parse.
func normalRepository(image string) string {
	ref, err := name.ParseReference(image, name.WeakValidation)
	if err != nil {
		repo, err := name.NewRepository(image, name.WeakValidation)
		if err != nil {
			return ""
		}
		return repo.Name()
	}
	return ref.Context().Name()
}

// repositoryOf returns the full name of the repository a resource is, or
// "" when it is a registry (go-containerregistry resolves repositories).
func repositoryOf(res authn.Resource) string {
	if r, ok := res.(name.Repository); ok {
		return r.Name()
	}
	return ""
}

// fileKeychain resolves credentials from one docker config file.
type fileKeychain struct{ cf *configfile.ConfigFile }

func (k fileKeychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	key := res.RegistryStr()
	if key == name.DefaultRegistry {
		key = authn.DefaultAuthKey
	}
	ac, err := k.cf.GetAuthConfig(key)
	if err != nil {
		return nil, err
	}
	if ac.Username == "" && ac.Password == "" && ac.IdentityToken == "" && ac.RegistryToken == "" && ac.Auth == "" {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{
		Username: ac.Username, Password: ac.Password, Auth: ac.Auth,
		IdentityToken: ac.IdentityToken, RegistryToken: ac.RegistryToken,
	}), nil
}

// parseDockerConfig reads a config.json-format document.
func parseDockerConfig(source string, b []byte) (*configfile.ConfigFile, error) {
	cf := configfile.New(source)
	if err := cf.LoadFromReader(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("parsing registry credentials in %s: %w", source, err)
	}
	return cf, nil
}

// sourcedKeychain is a keychain that can say where credentials came from.
type sourcedKeychain interface {
	// resolveSource passes over the credentials skip names.
	resolveSource(res authn.Resource, skip func(authn.Authenticator) bool) (authn.Authenticator, string, error)
}

// namedKeychain is a keychain of one source.
type namedKeychain struct {
	authn.Keychain
	source string
}

func (k namedKeychain) resolveSource(res authn.Resource, skip func(authn.Authenticator) bool) (authn.Authenticator, string, error) {
	a, err := k.Resolve(res)
	if err == nil && a != authn.Anonymous && skip != nil && skip(a) {
		return authn.Anonymous, "", nil
	}
	return a, k.source, err
}

// chain tries keychains in order, like authn.NewMultiKeychain, and
// remembers, per repository, where the credentials it gave came from, so
// that a registry's refusal can name them.
type chain struct {
	keychains []authn.Keychain

	mu   sync.Mutex
	used map[string]usedCreds // repository (or registry) → what it was given
	// refused are, per repository, the credentials (by fingerprint) its
	// registry refused lately, with their source: passed over for
	// refusedFor, so that one namespace's pull secret holding other
	// credentials for a registry cannot keep another's repository from
	// being read. Re-read (rotated) credentials are tried again.
	refused map[string]map[string]refusal
}

type usedCreds struct{ source, fingerprint string }

type refusal struct {
	source string
	at     time.Time
}

// refusedFor is how long refused credentials are passed over (after which
// they may have been rotated).
const refusedFor = time.Minute

func newChain(keychains ...authn.Keychain) *chain {
	return &chain{keychains: keychains, used: map[string]usedCreds{}, refused: map[string]map[string]refusal{}}
}

// fingerprint identifies credentials without keeping them.
func fingerprint(a authn.Authenticator) string {
	cfg, err := a.Authorization()
	if err != nil {
		return ""
	}
	b, _ := json.Marshal(cfg)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// refuse notes that the credentials last given for repository were
// refused. It reports whether there were any.
func (c *chain) refuse(repository string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.used[repository]
	if u.fingerprint == "" {
		return false
	}
	if c.refused[repository] == nil {
		c.refused[repository] = map[string]refusal{}
	}
	c.refused[repository][u.fingerprint] = refusal{u.source, time.Now()}
	return true
}

func (c *chain) skipper(resource string) func(authn.Authenticator) bool {
	return func(a authn.Authenticator) bool {
		fp := fingerprint(a)
		c.mu.Lock()
		defer c.mu.Unlock()
		r, ok := c.refused[resource][fp]
		return ok && time.Since(r.at) < refusedFor
	}
}

func (c *chain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	skip := c.skipper(res.String())
	for _, kc := range c.keychains {
		var (
			a      authn.Authenticator
			source string
			err    error
		)
		if s, ok := kc.(sourcedKeychain); ok {
			a, source, err = s.resolveSource(res, skip)
		} else {
			a, err = kc.Resolve(res)
		}
		if err != nil {
			return nil, err
		}
		if a != authn.Anonymous && !skip(a) {
			c.remember(res.String(), usedCreds{source, fingerprint(a)})
			return a, nil
		}
	}
	c.remember(res.String(), usedCreds{})
	return authn.Anonymous, nil
}

func (c *chain) remember(resource string, u usedCreds) {
	c.mu.Lock()
	c.used[resource] = u
	c.mu.Unlock()
}

// source returns where the credentials last given for a repository came
// from: "" when none were (anonymous), ok false when none were asked for.
func (c *chain) source(repository string) (source string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.used[repository]
	if ok && u.source == "" {
		// Every credential was refused and passed over: name the last
		// refused one, not "none".
		var last refusal
		for _, r := range c.refused[repository] {
			if time.Since(r.at) < refusedFor && r.at.After(last.at) {
				last = r
			}
		}
		if last.source != "" {
			return last.source, true
		}
	}
	return u.source, ok
}

// refresher is a keychain whose credentials can be re-read.
type refresher interface{ Refresh() }

// refreshCredentials makes the keychains that can re-read their sources
// do so at the next request. It reports whether any could.
func (c *Client) refreshCredentials() bool {
	refreshed := false
	for _, kc := range c.cfg.Keychains {
		if r, ok := kc.(refresher); ok {
			r.Refresh()
			refreshed = true
		}
	}
	return refreshed
}

// renewPuller starts a new puller, so that no transport keeps credentials
// that were refused or re-read.
func (c *Client) renewPuller() {
	c.pings.forget()
	if p, err := remote.NewPuller(c.opts...); err == nil {
		c.puller.Store(p)
	}
}
