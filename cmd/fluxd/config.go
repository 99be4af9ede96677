package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/gitrepo/gogit"
	historystore "github.com/fluxd/fluxd/history/store"
	"github.com/fluxd/fluxd/internal/memlimit"
	"github.com/fluxd/fluxd/internal/version"
	"github.com/fluxd/fluxd/platform/kube"
)

// configs is what the flags ask for, as each component's Config, checked
// before fluxd opens or starts anything.
type configs struct {
	daemon daemon.Config
	git    gogit.Config
	store  historystore.Config
	kube   kube.Config
	// election is the leader election's, without the address (known once
	// the API listens); nil without --leader-elect.
	election *kube.ElectionConfig
}

// configure turns the flags into the components' Configs, with the
// defaults that follow from other flags, and reports every problem at
// once.
func (f flags) configure() (configs, error) {
	c := configs{
		daemon: daemon.Config{
			Listen:        f.listen,
			TokensFile:    f.tokensFile,
			ShutdownGrace: f.shutdownGrace,
			Version:       version.String(),
			GitRefresh:    f.gitPollInterval,

			MaxRolloutTimeout: f.maxRolloutTimeout,
		},
		git: gogit.Config{
			URL: f.gitURL, Branch: f.gitBranch, Paths: f.gitPaths,
			User: f.gitUser, Email: f.gitEmail, Dir: filepath.Join(f.stateDir, "repo"), Timeout: f.gitTimeout,
			SSHKeyFile: f.gitSSHKeyFile, KnownHostsFile: f.gitSSHKnownHostsFile, AllowInsecure: f.gitAllowInsecure,
		},
		store: historystore.Config{URL: f.historyDB, PasswordFile: f.historyDBPasswordFile,
			MaxConns: f.historyDBMaxConns, StatementTimeout: f.historyDBStatementTimeout},
		kube: kube.Config{Kubeconfig: f.kubeconfig, Context: f.kubeContext, Namespaces: f.namespaces, QPS: f.kubeQPS, Burst: f.kubeBurst},
	}
	if c.store.URL == "" {
		c.store.URL = filepath.Join(f.stateDir, "history.db")
	}
	if f.gitSSHKeySecret != "" && f.gitSSHKeyFile != "" {
		return configs{}, errors.New("invalid configuration: --git-ssh-key-secret and --git-ssh-key-file both name the SSH key; give one")
	}
	if c.git.SSHKeyFile == "" && f.gitSSHKeySecret == "" {
		c.git.SSHKeyFile, c.git.GenerateSSHKey = filepath.Join(f.stateDir, "ssh", "identity"), true
	}
	if f.gitSSHKeySecret != "" {
		// A placeholder for Validate: the key is read from the Secret
		// once the cluster is reachable (openGit).
		c.git.SSHKeySource = "the Secret " + f.gitSSHKeySecret
		c.git.SSHKey = []byte("-")
	}
	errs := []error{c.daemon.Validate(), c.git.Validate(), validateRetryMax(f.gitCloneRetryMax), validateWebFlags(f), f.notify.validate(), f.verify.validate(), f.sync.validate(), validatePprof(f), memlimit.ValidateRatio(f.memoryLimitRatio), validateGCPercent(f.gcPercent)}
	if f.clusterName != "" && !clusterNameRE.MatchString(f.clusterName) {
		errs = append(errs, fmt.Errorf("--cluster-name %q is not a cluster name: use 1 to 40 lowercase letters, digits and '-', starting with a letter (it prefixes the IDs of this cluster's release jobs)", f.clusterName))
	}
	if f.webhookListen != "" && f.webhookSecretFile == "" {
		errs = append(errs, errors.New("--webhook-listen needs --webhook-secret-file, a file holding the webhooks' shared secret: without one anybody could post notifications"))
	}
	if f.leaderElect {
		c.election = &kube.ElectionConfig{Namespace: f.leaderNamespace, Name: f.leaderName,
			LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod}
		// The address is checked when it is known (advertise).
		withAddress := *c.election
		withAddress.Address = "-"
		errs = append(errs, withAddress.Validate())
	}
	if err := errors.Join(errs...); err != nil {
		return configs{}, fmt.Errorf("invalid configuration:\n%w", indent(err))
	}
	return c, nil
}

func validateRetryMax(d time.Duration) error {
	if d < time.Second {
		return fmt.Errorf("--git-clone-retry-max %v is under the first wait of 1s", d)
	}
	return nil
}

func indent(err error) error {
	return fmt.Errorf("  - %s", strings.ReplaceAll(err.Error(), "\n", "\n  - "))
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}

// clusterNameRE is what --cluster-name takes: a job ID's prefix, with no
// "." (the prefix ends at the ID's last one).
var clusterNameRE = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)
