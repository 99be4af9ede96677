package main

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/platform/kube"
)

// openGit builds the working clone's repository (not cloned yet): with
// --git-ssh-key-secret its deploy key is read from the Secret, or
// generated and written there. A deploy key is logged before the clone,
// which fails until the key is added.
func openGit(ctx context.Context, cfg gogit.Config, keySecret string, cluster *kube.Cluster, health *startupHealth, reg prometheus.Registerer, log *slog.Logger) (*gogit.Repo, error) {
	if keySecret != "" && gogit.IsSSH(cfg.URL) {
		ns, name := secretName(keySecret, envOr("POD_NAMESPACE", "default"))
		health.starting("reading the deploy key Secret " + ns + "/" + name)
		key, created, err := cluster.DeployKey(ctx, ns, name, gogit.GenerateKeyPEM)
		if err != nil {
			return nil, fmt.Errorf("--git-ssh-key-secret: %w", err)
		}
		cfg.SSHKey, cfg.SSHKeySource = key, "the Secret "+ns+"/"+name
		if created {
			log.Info("generated an SSH deploy key and stored it in its Secret", "component", "git", "secret", ns+"/"+name)
		}
	}
	repo, err := gogit.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("the git remote: %w", err)
	}
	repo.Instrument(reg)
	registerGitMetrics(reg, repo)
	if key, ok := repo.DeployKey(); ok {
		where := cfg.SSHKeyFile
		if cfg.SSHKeySource != "" {
			where = cfg.SSHKeySource
		}
		log.Info("reaching git over SSH with this deploy key", "component", "git", "key", key.PublicKey, "fingerprint", key.Fingerprint, "kept_in", where)
	}
	return repo, nil
}

// startCloning clones the manifests in g, retrying until it succeeds
// while fluxd serves: a deploy key can be shown ('fluxctl identity')
// before it is added. It returns once the first attempt is over (or has
// taken --git-timeout), so that a remote that answers is cloned before
// the API's first call.
func startCloning(ctx context.Context, g *errgroup.Group, repo *gogit.Repo, cfg gogit.Config, retryMax time.Duration, health *startupHealth, log *slog.Logger) error {
	firstTry := make(chan struct{})
	var firstOnce sync.Once
	g.Go(func() error {
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: retryMax}
		err := repo.KeepCloning(ctx, backoff, func(err error, next time.Duration) {
			firstOnce.Do(func() { close(firstTry) })
			log.Warn("cannot clone the manifests yet; fluxd serves and tries again", "component", "git", "error", err, "retry_in", next.Round(time.Millisecond))
		})
		if err == nil {
			log.Info("cloned the manifests", "component", "git", "url", gogit.Redact(cfg.URL), "branch", cfg.Branch, "paths", cfg.Paths)
		}
		return nil
	})
	health.starting("trying the first clone of " + gogit.Redact(cfg.URL))
	select {
	case <-repo.Cloned():
	case <-firstTry:
	case <-time.After(max(cfg.Timeout, time.Second)):
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// pollGit fetches the remote on an interval, so that a broken remote shows
// in the log before a release needs it.
func pollGit(ctx context.Context, repo interface {
	Sync(context.Context) (string, error)
}, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := repo.Sync(ctx); err != nil && ctx.Err() == nil {
				log.Warn("fetching the manifests failed", "component", "git", "error", err)
			}
		}
	}
}

// registerGitMetrics exports the git remote's state: when it last
// answered, and whether an operation is waiting on it.
func registerGitMetrics(reg prometheus.Registerer, repo *gogit.Repo) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fluxd_git_last_sync_timestamp_seconds", Help: "When a fetch or push of the manifests' remote last succeeded (Unix time)."}, func() float64 {
		if t := repo.Status().LastSync; !t.IsZero() {
			return float64(t.UnixNano()) / 1e9
		}
		return 0
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fluxd_git_waiting_seconds", Help: "How long the git operation in flight has waited on the remote; 0 when none is."}, func() float64 {
		if st := repo.Status(); st.Waiting != "" {
			return time.Since(st.WaitingSince).Seconds()
		}
		return 0
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fluxd_git_cloned", Help: "1 once the manifests' first clone has succeeded; 0 while fluxd retries it (a deploy key not added yet, the remote unreachable)."}, func() float64 {
		if repo.Status().NotCloned {
			return 0
		}
		return 1
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fluxd_git_up", Help: "1 when the last git network operation succeeded, 0 when it failed."}, func() float64 {
		if repo.Status().Error != "" {
			return 0
		}
		return 1
	}))
}

// secretName splits --git-ssh-key-secret's NAMESPACE/NAME, or NAME in
// namespace.
func secretName(flag, namespace string) (string, string) {
	if ns, name, ok := strings.Cut(flag, "/"); ok {
		return ns, name
	}
	return namespace, flag
}
