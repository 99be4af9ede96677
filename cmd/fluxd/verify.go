package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/verify"
	"github.com/fluxd/fluxd/verify/cosign"
	"github.com/fluxd/fluxd/verify/storecache"
)

// verifyFlags are image signature verification's flags.
type verifyFlags struct {
	config string
}

func (f *verifyFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.config, "verify-config", "", "YAML file of image signature verification profiles (cosign public keys, keyless identities under a trusted root) and the repositories, by glob, that need them (see docs/security.md, \"Image signatures\"); a release of an image that does not verify is refused, and automation skips it. Re-read when it or a key or trusted root it names changes, and a keySecrets Secret is read again every 30 s; a bad edit is refused, with its line, and the previous one kept (default: none, no image is verified)")
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
	if err := checkTrustedRoots(f.config, l); err != nil {
		return fmt.Errorf("--verify-config: %w", err)
	}
	return nil
}

// checkTrustedRoots says which keyless profiles' trusted roots are not
// ones, with their lines: at start, and for each config read again.
func checkTrustedRoots(path string, l *verify.Loaded) error {
	var errs []error
	for _, p := range l.Profiles {
		if p.TrustedRoot == "" {
			continue
		}
		if err := cosign.CheckTrustedRoot(p.TrustedRootJSON); err != nil {
			errs = append(errs, fmt.Errorf("%s: line %d: profile %q: trusted root %s: %w", path, p.Line, p.Name, p.TrustedRoot, err))
		}
	}
	return errors.Join(errs...)
}

// openVerifyConfig opens --verify-config for watching: a config read
// again whose trusted root is not one is refused, and the one in force
// kept, as a bad line is.
func openVerifyConfig(ctx context.Context, path string, secrets verify.SecretKeys) (*verify.File, error) {
	file, err := verify.OpenFileWith(ctx, path, secrets)
	if err != nil {
		return nil, err
	}
	file.SetCheck(func(l *verify.Loaded) error { return checkTrustedRoots(path, l) })
	return file, nil
}

// verifyConfigInterval is how often --verify-config's files are looked at
// for a change.
const verifyConfigInterval = 5 * time.Second

// newVerifier builds the verification gate over --verify-config: cosign
// verification (keys and keyless) through the registry client's
// transport (its rate limits, credentials and request metrics, signature
// lookups counted apart), results cached per digest in memory and in the
// history store, which the replicas share (verify.Cached says what is
// kept, and for how long). Nil without the flag.
func newVerifier(ctx context.Context, f verifyFlags, images *oci.Client, store history.VerificationResults, rc *rest.Config, reg prometheus.Registerer, log *slog.Logger) (release.Verifier, *verify.File, error) {
	if f.config == "" {
		return nil, nil, nil
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("--verify-config: a Kubernetes client for keySecrets: %w", err)
	}
	file, err := openVerifyConfig(ctx, f.config, secretKeys(kc))
	if err != nil {
		return nil, nil, fmt.Errorf("--verify-config: %w", err)
	}
	v := cosign.New(cosign.Config{Transport: images.SignatureTransport(), Keychain: images.Keychain()})
	cfg := file.Current()
	log.Info("image signature verification", "component", "verify", "config", f.config, "profiles", len(cfg.Profiles), "repositories", len(cfg.Repositories))
	return verify.NewGate(file, newVerifyCache(v, store, reg, log)), file, nil
}

// secretKeys reads a profile's keySecrets with fluxd's client: it needs
// get on each Secret named (see docs/security.md, "Keys in a Secret").
// The data is only parsed for public keys, never logged.
func secretKeys(kc kubernetes.Interface) verify.SecretKeys {
	return func(ctx context.Context, namespace, name string) (map[string][]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		s, err := kc.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return s.Data, nil
	}
}

// newVerifyCache puts the caches in front of v: memory, then the store.
func newVerifyCache(v verify.Verifier, store history.VerificationResults, reg prometheus.Registerer, log *slog.Logger) verify.Cached {
	results := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fluxd_verify_results_total",
		Help: "Image signature verification results, by where they came from (memory or store: cached, no request; registry: verified, with requests) and outcome.",
	}, []string{"source", "outcome"})
	reg.MustRegister(results)
	var lastWarn atomic.Int64
	return verify.Cached{
		Verifier: v,
		Memory:   &verify.MemoryCache{},
		Store:    storecache.Cache{Store: store},
		Observe: func(src verify.Source, r verify.Result) {
			results.WithLabelValues(string(src), string(r.Outcome)).Inc()
		},
		StoreError: func(err error) {
			// Once a minute at most: a store that is down is said by
			// readiness already, and costs verifications, not answers.
			now := time.Now().UnixNano()
			if last := lastWarn.Load(); now-last > int64(time.Minute) && lastWarn.CompareAndSwap(last, now) {
				log.Warn("cannot read or keep verification results in the history database; images are verified with the registry meanwhile", "component", "verify", "error", err)
			}
		},
	}
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
