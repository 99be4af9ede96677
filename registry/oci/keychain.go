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

// SecretSource returns docker configs (config.json format), such as the
// image pull secrets of the cluster's workloads.
type SecretSource func(ctx context.Context) ([][]byte, error)

// SecretKeychain resolves credentials from a SecretSource, re-reading it
// at most once per TTL, and at once after Refresh, which the client calls
// when a registry answers 401, before it reports the error.
type SecretKeychain struct {
	src SecretSource
	ttl time.Duration

	mu     sync.Mutex
	chain  authn.Keychain
	readAt time.Time
}

// NewSecretKeychain returns a keychain over src.
func NewSecretKeychain(src SecretSource, ttl time.Duration) *SecretKeychain {
	return &SecretKeychain{src: src, ttl: ttl}
}

// Refresh makes the next Resolve read the source again.
func (k *SecretKeychain) Refresh() {
	k.mu.Lock()
	k.chain = nil
	k.mu.Unlock()
}

// Resolve finds credentials for res in the secrets; anonymous if none.
func (k *SecretKeychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.chain == nil || time.Since(k.readAt) > k.ttl {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		configs, err := k.src(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reading image pull secrets: %w", err)
		}
		var chains []authn.Keychain
		for i, b := range configs {
			cf, err := parseDockerConfig(fmt.Sprintf("image pull secret #%d", i+1), b)
			if err != nil {
				continue // one malformed secret must not hide the others
			}
			chains = append(chains, fileKeychain{cf})
		}
		k.chain, k.readAt = authn.NewMultiKeychain(chains...), time.Now()
	}
	return k.chain.Resolve(res)
}
