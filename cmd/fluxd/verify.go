package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/verify"
	"github.com/fluxd/fluxd/verify/cosign"
)

// verifyFlags are image signature verification's flags.
type verifyFlags struct {
	config string
}

func (f *verifyFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "verify-config", "", "YAML file of image signature verification profiles (cosign public keys, keyless identities under a trusted root) and the repositories, by glob, that need them (see docs/security.md, \"Image signatures\"); a release of an image that does not verify is refused, and automation skips it. Re-read when it or a key or trusted root it names changes; a bad edit is refused, with its line, and the previous one kept (default: none, no image is verified)")
}

// validate reads the config and its keys, so that a bad one stops fluxd
// at once, naming its lines, before anything else starts.
func (f verifyFlags) validate() error {
	if f.config == "" {
		return nil
	}
	l, err := verify.Load(f.config)
	if err != nil {
		return fmt.Errorf("--verify-config: %w", err)
	}
	if len(l.Profiles) == 0 {
		return fmt.Errorf("--verify-config: %s names no verification profile, so nothing would be verified: add one (see docs/security.md, \"Image signatures\"), or leave the flag out", f.config)
	}
	var errs []error
	for _, p := range l.Profiles {
		if p.TrustedRoot == "" {
			continue
		}
		if err := cosign.CheckTrustedRoot(p.TrustedRootJSON); err != nil {
			errs = append(errs, fmt.Errorf("--verify-config: %s: line %d: profile %q: trusted root %s: %w", f.config, p.Line, p.Name, p.TrustedRoot, err))
		}
	}
	return errors.Join(errs...)
}

// verifyConfigInterval is how often --verify-config's files are looked at
// for a change.
const verifyConfigInterval = 5 * time.Second

// newVerifier builds the verification gate over --verify-config: cosign
// verification (keys and keyless) through the registry client's transport (its rate
// limits and request metrics) and credentials, results cached in memory
// per digest. Nil without the flag.
func newVerifier(f verifyFlags, images *oci.Client, log *slog.Logger) (release.Verifier, *verify.File, error) {
	if f.config == "" {
		return nil, nil, nil
	}
	file, err := verify.OpenFile(f.config)
	if err != nil {
		return nil, nil, fmt.Errorf("--verify-config: %w", err)
	}
	v := cosign.New(cosign.Config{Transport: images.Transport(), Keychain: images.Keychain()})
	cfg := file.Current()
	log.Info("image signature verification", "component", "verify", "config", f.config, "profiles", len(cfg.Profiles), "repositories", len(cfg.Repositories))
	return verify.NewGate(file, verify.Cached{Verifier: v, Cache: &verify.MemoryCache{}}), file, nil
}

// watchVerifyConfig re-reads --verify-config when it changes, until ctx
// ends.
func watchVerifyConfig(ctx context.Context, file *verify.File, log *slog.Logger) {
	if file == nil {
		return
	}
	file.Watch(ctx, verifyConfigInterval, func(err error) {
		if err != nil {
			log.Error("the verification config was changed and is refused", "component", "verify", "error", err)
			return
		}
		cfg := file.Current()
		log.Info("the verification config was reloaded", "component", "verify", "profiles", len(cfg.Profiles), "repositories", len(cfg.Repositories))
	})
}
