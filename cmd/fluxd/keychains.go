package main

import (
	"context"
	"fmt"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/fluxd/fluxd/platform/kube"
	"github.com/fluxd/fluxd/registry/oci"
)

// secretReader is what registryKeychains reads from the cluster
// (*kube.Cluster).
type secretReader interface {
	PullSecrets(ctx context.Context) ([]kube.PullSecret, error)
	NamedSecrets(ctx context.Context, names []string) ([][]byte, error)
}

// credentialsTTL is how long registry credentials are cached; a 401 reads
// them again at once.
const credentialsTTL = time.Minute

// registryKeychains returns fluxd's registry credentials, most specific
// first: the workloads' image pull secrets, each offered only for the
// images of the workloads that use it; the named --registry-secret
// Secrets; the --registry-credentials file. The last two are the
// operator's and serve every repository of their registries.
// --docker-config and the default docker locations follow, in oci.New.
// A credentials file that cannot be read is an error now, not at the
// first scan.
func registryKeychains(ctx context.Context, cluster secretReader, secrets []string, credentialsFile string) ([]authn.Keychain, error) {
	keychains := []authn.Keychain{oci.NewSecretKeychain(func(ctx context.Context) ([]oci.Credentials, error) {
		ps, err := cluster.PullSecrets(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]oci.Credentials, len(ps))
		for i, s := range ps {
			out[i] = oci.Credentials{Source: "image pull secret " + s.Name, DockerConfig: s.DockerConfig, Images: s.Images}
		}
		return out, nil
	}, credentialsTTL)}
	if len(secrets) > 0 {
		names := append([]string(nil), secrets...)
		// Read and checked now: a malformed Secret fails the start,
		// naming what is wrong, rather than being passed over later.
		cfgs, err := cluster.NamedSecrets(ctx, names)
		if err != nil {
			return nil, fmt.Errorf("--registry-secret: %w", err)
		}
		for i, cfg := range cfgs {
			if err := oci.CheckDockerConfig("--registry-secret "+names[i], cfg); err != nil {
				return nil, err
			}
		}
		keychains = append(keychains, oci.NewSecretKeychain(func(ctx context.Context) ([]oci.Credentials, error) {
			cfgs, err := cluster.NamedSecrets(ctx, names)
			if err != nil {
				return nil, err
			}
			if len(cfgs) != len(names) {
				return nil, fmt.Errorf("read %d of %d --registry-secret Secrets", len(cfgs), len(names))
			}
			out := make([]oci.Credentials, len(cfgs))
			for i, cfg := range cfgs {
				out[i] = oci.Credentials{Source: "--registry-secret " + names[i], DockerConfig: cfg, Global: true}
			}
			return out, nil
		}, credentialsTTL))
	}
	if credentialsFile != "" {
		if _, err := oci.CredentialsFile(credentialsFile)(ctx); err != nil {
			return nil, err
		}
		keychains = append(keychains, oci.NewSecretKeychain(oci.CredentialsFile(credentialsFile), credentialsTTL))
	}
	return keychains, nil
}
