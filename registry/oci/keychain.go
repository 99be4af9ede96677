package oci

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/docker/cli/cli/config/configfile"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
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
	a, _, err := k.resolveSource(res)
	return a, err
}

// resolveSource is Resolve, also naming the credentials' source. The
// first credentials, in the source's order, that apply to the repository
// and have an entry for its registry win.
func (k *SecretKeychain) resolveSource(res authn.Resource) (authn.Authenticator, string, error) {
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
		if a != authn.Anonymous {
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
	resolveSource(res authn.Resource) (authn.Authenticator, string, error)
}

// namedKeychain is a keychain of one source.
type namedKeychain struct {
	authn.Keychain
	source string
}

func (k namedKeychain) resolveSource(res authn.Resource) (authn.Authenticator, string, error) {
	a, err := k.Resolve(res)
	return a, k.source, err
}

// chain tries keychains in order, like authn.NewMultiKeychain, and
// remembers, per repository, where the credentials it gave came from, so
// that a registry's refusal can name them.
type chain struct {
	keychains []authn.Keychain

	mu   sync.Mutex
	used map[string]string // repository (or registry) → source; "" for none
}

func newChain(keychains ...authn.Keychain) *chain {
	return &chain{keychains: keychains, used: map[string]string{}}
}

func (c *chain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	for _, kc := range c.keychains {
		var (
			a      authn.Authenticator
			source string
			err    error
		)
		if s, ok := kc.(sourcedKeychain); ok {
			a, source, err = s.resolveSource(res)
		} else {
			a, err = kc.Resolve(res)
		}
		if err != nil {
			return nil, err
		}
		if a != authn.Anonymous {
			c.remember(res.String(), source)
			return a, nil
		}
	}
	c.remember(res.String(), "")
	return authn.Anonymous, nil
}

func (c *chain) remember(resource, source string) {
	c.mu.Lock()
	c.used[resource] = source
	c.mu.Unlock()
}

// source returns where the credentials last given for a repository came
// from: "" when none were (anonymous), ok false when none were asked for.
func (c *chain) source(repository string) (source string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	source, ok = c.used[repository]
	return source, ok
}
