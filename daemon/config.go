package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Config is the daemon's own configuration, built from flags by cmd/fluxd.
type Config struct {
	// Listen is the TCP address of the gRPC API, e.g. "127.0.0.1:3030".
	Listen string
	// TokensFile holds the hashed API tokens; see package auth.
	TokensFile string
	// ShutdownGrace is how long in-flight calls may finish on shutdown.
	ShutdownGrace time.Duration
	// Version is the build version the Version RPC reports.
	Version string
	// GitRefresh is how long a read of the manifests in git is reused by
	// listing calls; releases always fetch first.
	GitRefresh time.Duration
	// ListWait is how long list-images waits for a registry refresh, or
	// for the images of the page it shows, before it answers from the
	// cache (default 1.5s; 3s for an image lister without a tag list).
	ListWait time.Duration
	// MaxRolloutTimeout caps the rollout timeout a caller may ask for
	// (rollout_timeout_seconds): jobs run one at a time for every
	// instance, so one caller's long wait holds everyone's releases.
	// Default DefaultMaxRolloutTimeout.
	MaxRolloutTimeout time.Duration
}

// DefaultMaxRolloutTimeout is MaxRolloutTimeout when it is zero.
const DefaultMaxRolloutTimeout = 30 * time.Minute

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.Listen == "" {
		errs = append(errs, errors.New("--listen is empty: give a TCP address such as 127.0.0.1:3030"))
	} else if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q is not a host:port address: %w", c.Listen, err))
	}
	if c.TokensFile == "" {
		errs = append(errs, errors.New("--tokens-file is empty: every call needs a token; create one with 'fluxd token create --tokens-file FILE --instance NAME --role admin'"))
	} else if _, err := os.Stat(c.TokensFile); err != nil {
		errs = append(errs, fmt.Errorf("--tokens-file %s cannot be read (%w); create it with 'fluxd token create --tokens-file %s --instance NAME --role admin'", c.TokensFile, err, c.TokensFile))
	}
	if c.GitRefresh < 0 {
		errs = append(errs, fmt.Errorf("--git-poll-interval %v is negative", c.GitRefresh))
	}
	if c.MaxRolloutTimeout < 0 {
		errs = append(errs, fmt.Errorf("--max-rollout-timeout %v is negative", c.MaxRolloutTimeout))
	}
	if c.ShutdownGrace < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-grace %v is negative", c.ShutdownGrace))
	}
	return errors.Join(errs...)
}
