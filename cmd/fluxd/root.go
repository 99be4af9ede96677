package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/history"
	historystore "github.com/fluxd/fluxd/history/store"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/version"
	"github.com/fluxd/fluxd/platform/kube"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/release"
)

// flags are the daemon's command-line flags; run turns them into the
// components' Configs.
type flags struct {
	listen                    string
	tokensFile                string
	shutdownGrace             time.Duration
	logLevel                  string
	logFormat                 string
	kubeconfig                string
	kubeContext               string
	namespaces                []string
	stateDir                  string
	historyDB                 string
	historyDBPasswordFile     string
	historyDBMaxConns         int
	historyDBStatementTimeout time.Duration

	gitURL, gitBranch         string
	gitAllowInsecure          bool
	gitPaths                  []string
	gitUser, gitEmail         string
	gitPollInterval           time.Duration
	gitTimeout                time.Duration
	gitSSHKeyFile             string
	gitSSHKnownHostsFile      string
	gitSSHKeySecret           string
	gitCloneRetryMax          time.Duration
	healthListen              string
	webhookRequireTimestamp   bool
	dockerConfig              string
	registryConcurrency       int
	registryPlatform          string
	metricsListen             string
	pprof                     bool
	webhookListen             string
	webListen                 string
	webAllowWithoutClientCert bool
	webSecureCookie           bool
	webTrustedProxies         []string
	gitWebURL                 string
	webhookSecretFile         string
	registryRate              float64
	registryBurst             int
	rolloutTimeout            time.Duration
	maxRolloutTimeout         time.Duration
	tls                       tlsFlags
	rollbackOnFailure         bool
	automationShort           time.Duration
	automationLong            time.Duration
	automationMaxBackoff      time.Duration

	recheckMin, recheckMax time.Duration
	listMin, listMax       time.Duration
	registryCredentials    string
	registryPageSize       int
	registryMaxTagPages    int
	registryMaxTagBytes    int64
	registrySecrets        []string

	kubeQPS   float32
	kubeBurst int

	leaderElect                 bool
	leaderNamespace, leaderName string
	advertiseAddress            string
	leaseDuration, renewDeadline,
	retryPeriod time.Duration

	sync   syncFlags
	notify notifyFlags
}

func newRootCommand() *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:           "fluxd",
		Short:         "fluxd releases new container images through git to Kubernetes",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), f, cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "127.0.0.1:3030", "TCP address of the gRPC API")
	fs.StringVar(&f.tokensFile, "tokens-file", "", "file of hashed API tokens (see 'fluxd token create')")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "how long in-flight calls may finish on shutdown")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context (default: its current context)")
	fs.StringSliceVar(&f.namespaces, "namespaces", nil, "namespaces to watch, comma-separated (default: all)")
	fs.StringVar(&f.stateDir, "state-dir", "/var/lib/fluxd", "directory for the git working clone and, by default, the history database")
	fs.StringVar(&f.historyDB, "history-db", "", "where history, jobs and the registry cache are kept: a SQLite file (a path or sqlite:///path; for one replica) or postgres://USER@HOST:PORT/DB?sslmode=... (PostgreSQL, for several replicas or records off the node; the password is never logged) (default: STATE_DIR/history.db)")
	fs.StringVar(&f.historyDBPasswordFile, "history-db-password-file", "", "file holding the PostgreSQL password (default: $PGPASSWORD, else ~/.pgpass)")
	fs.IntVar(&f.historyDBMaxConns, "history-db-max-conns", 10, "PostgreSQL connections fluxd may open (0 to 1000; every replica opens this many)")
	fs.DurationVar(&f.historyDBStatementTimeout, "history-db-statement-timeout", 30*time.Second, "PostgreSQL ends a statement that runs longer, in whole milliseconds rounded up (0: never)")
	fs.StringVar(&f.gitURL, "git-url", "", "git remote of the manifests: file://, http(s):// (credentials in the URL are never logged), ssh://[git@]host[:port]/path or git@host:path")
	fs.BoolVar(&f.gitAllowInsecure, "git-allow-insecure", false, "accept a plaintext --git-url (http://, git://) to a host other than this one: whoever is on the network path could change what fluxd applies (credentials in such a URL are always warned about)")
	fs.StringVar(&f.gitSSHKeyFile, "git-ssh-key-file", "", "private key (ed25519 recommended, no passphrase) for an SSH --git-url (default: one fluxd generates and keeps in STATE_DIR/ssh/identity; 'fluxctl identity' prints its public key)")
	fs.StringVar(&f.gitSSHKeySecret, "git-ssh-key-secret", "", "keep the SSH key in this Kubernetes Secret, NAME in $POD_NAMESPACE or NAMESPACE/NAME, under the key \"identity\": read from it, or generated and written into it when it holds none (the Secret must exist; the install ships it empty). Replaces --git-ssh-key-file")
	fs.DurationVar(&f.gitCloneRetryMax, "git-clone-retry-max", time.Minute, "while the first clone fails (remote unreachable, deploy key not added yet), fluxd serves and retries it, waiting 1s, then twice as long each time up to this")
	fs.StringVar(&f.healthListen, "health-listen", "", "address of a plaintext HTTP listener for probes, e.g. 0.0.0.0:3032: /healthz and /readyz (503 with the reason), no token, no API (default: off; the gRPC health service on --listen answers too)")
	fs.StringVar(&f.gitSSHKnownHostsFile, "git-ssh-known-hosts-file", "", "known_hosts file listing the SSH git host's keys (required with an SSH --git-url; a host whose key it does not list is refused)")
	fs.StringVar(&f.gitBranch, "git-branch", "main", "branch to read and push")
	fs.StringSliceVar(&f.gitPaths, "git-path", nil, "sub-paths of the repository holding manifests, relative (repeatable; default: the root)")
	fs.StringVar(&f.gitUser, "git-user", "fluxd", "committer name of fluxd's commits")
	fs.StringVar(&f.gitEmail, "git-email", "fluxd@localhost", "committer email of fluxd's commits")
	fs.DurationVar(&f.gitPollInterval, "git-poll-interval", time.Minute, "how often to fetch the remote; listing calls reuse a fetch this long")
	fs.BoolVar(&f.webhookRequireTimestamp, "webhook-require-timestamp", false, "refuse signed webhooks (X-Hub-Signature-256) without a signed X-Fluxd-Timestamp, which could be replayed")
	fs.DurationVar(&f.gitTimeout, "git-timeout", gogit.DefaultTimeout, "how long a git fetch or push may take before it fails (a clone: four times as long)")
	fs.StringVar(&f.dockerConfig, "docker-config", "", "docker config.json with registry credentials (default: ~/.docker/config.json)")
	fs.IntVar(&f.registryConcurrency, "registry-concurrency", 8, "registry metadata requests in flight per repository")
	fs.StringVar(&f.registryPlatform, "registry-platform", "linux/amd64", "platform to pick from multi-platform images")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "address for Prometheus metrics at /metrics, e.g. 127.0.0.1:9797 (default: off); unauthenticated, so keep it on a private address")
	fs.BoolVar(&f.pprof, "pprof", false, "also serve Go's profiles (net/http/pprof) at /debug/pprof/ on --metrics-listen: CPU, heap, allocations, goroutines; unauthenticated like the metrics")
	fs.StringVar(&f.webhookListen, "webhook-listen", "", "address for registry push webhooks at POST /v1/notify (default: off)")
	fs.StringVar(&f.webListen, "web-listen", "", "address for the status page, e.g. 127.0.0.1:3031 (default: off); sign in with an API token. With --tls-client-ca-file it requires client certificates as the API does")
	fs.BoolVar(&f.webSecureCookie, "web-secure-cookie", false, "the status page is reached over HTTPS through a TLS-terminating proxy: make its session cookie Secure (named __Host-fluxd_session) and send HSTS, as under --tls-cert-file")
	fs.StringVar(&f.gitWebURL, "git-web-url", "", "prefix of the forge's commit pages, such that PREFIX/COMMIT is a commit's page (e.g. https://github.com/org/repo/commit): the status page links commits there")
	fs.StringSliceVar(&f.webTrustedProxies, "web-trusted-proxies", nil, "CIDRs (or addresses) of the proxies in front of the status page, e.g. an Ingress controller's pod network: the client's address is read from their X-Forwarded-For (for counting failed sign-ins per client); default none, the connection's address")
	fs.BoolVar(&f.webAllowWithoutClientCert, "web-allow-without-client-cert", false, "with --tls-client-ca-file: serve the status page without asking for a client certificate (the API still requires one; a token is still needed)")
	fs.StringVar(&f.webhookSecretFile, "webhook-secret-file", "", "file holding the webhooks' shared secret (required with --webhook-listen)")
	fs.Float64Var(&f.registryRate, "registry-rate", 100, "registry requests per second per host; a 429 halves it for that host, successes restore it")
	fs.IntVar(&f.registryBurst, "registry-burst", 20, "registry requests that may go at once above --registry-rate")
	fs.DurationVar(&f.rolloutTimeout, "rollout-timeout", 5*time.Minute, "how long a release job waits for its rollout before failing (a Deployment's progressDeadlineSeconds fails it sooner)")
	f.tls.register(fs)
	fs.DurationVar(&f.maxRolloutTimeout, "max-rollout-timeout", daemon.DefaultMaxRolloutTimeout, "the longest rollout timeout a caller may ask for (fluxctl release --rollout-timeout); jobs run one at a time for every instance, so a longer wait would hold everyone's releases")
	fs.BoolVar(&f.rollbackOnFailure, "rollback-on-failure", false, "revert a release whose rollout fails (a new commit, re-applied and followed); fluxctl release --rollback-on-failure asks for it per release")
	fs.DurationVar(&f.automationShort, "automation-short-wait", 15*time.Second, "automator: wait after a release before checking the service again")
	fs.DurationVar(&f.automationLong, "automation-long-wait", time.Minute, "automator: wait after a check that found nothing newer")
	fs.DurationVar(&f.automationMaxBackoff, "automation-max-backoff", 10*time.Minute, "automator: longest wait before retrying a failing service (the wait doubles per failure from --automation-short-wait)")
	fs.IntVar(&f.registryMaxTagPages, "registry-max-tag-pages", oci.DefaultMaxTagPages, "most tag-list pages fluxd follows for one repository; a registry that pages on and on fails with an error saying so")
	fs.Int64Var(&f.registryMaxTagBytes, "registry-max-tag-list-bytes", oci.DefaultMaxTagListBytes, "most bytes fluxd reads of one repository's tag list, across its pages")
	fs.IntVar(&f.registryPageSize, "registry-page-size", 1000, "tags per tag-list page asked of registries (the n parameter); smaller for registries that reject large pages, 0 to send none")
	fs.StringVar(&f.registryCredentials, "registry-credentials", "", "YAML file of per-registry credentials: registries: {HOST: {username, password | passwordFile | token}}; re-read every minute and after a 401")
	fs.StringSliceVar(&f.registrySecrets, "registry-secret", nil, "NAMESPACE/NAME of a dockerconfigjson Secret with registry credentials for every workload (repeatable); re-read every minute and after a 401")
	fs.DurationVar(&f.recheckMin, "registry-recheck-min", time.Minute, "shortest wait between manifest HEADs of a mutable tag (latest, a branch), used after it moved; the wait doubles while it does not move")
	fs.DurationVar(&f.recheckMax, "registry-recheck-max", time.Hour, "longest wait between manifest HEADs of a mutable tag; a push notification checks at once")
	fs.DurationVar(&f.listMin, "registry-list-min", time.Minute, "how long a repository's tag list is reused after it changed (0: list on every use); the time doubles while it does not change, up to --registry-list-max; a push notification lists at once")
	fs.DurationVar(&f.listMax, "registry-list-max", 5*time.Minute, "longest time a repository's tag list is reused without listing it again")
	fs.Float32Var(&f.kubeQPS, "kube-api-qps", 50, "requests per second to the Kubernetes API server (client-go rate limit)")
	fs.IntVar(&f.kubeBurst, "kube-api-burst", 100, "requests to the Kubernetes API server that may go at once above --kube-api-qps")
	fs.BoolVar(&f.leaderElect, "leader-elect", false, "run as one of several replicas: only the holder of a coordination.k8s.io Lease runs the automator and release jobs; the others serve reads and forward the rest to it. The replicas must share --history-db: a PostgreSQL database (each replica with its own --state-dir), or a SQLite file only when every replica runs on the same host")
	fs.StringVar(&f.leaderNamespace, "leader-elect-namespace", envOr("POD_NAMESPACE", "default"), "namespace of the leader Lease")
	fs.StringVar(&f.leaderName, "leader-elect-lease-name", "fluxd", "name of the leader Lease")
	fs.StringVar(&f.advertiseAddress, "advertise-address", "", "host:port other replicas reach this one's API at (default: --listen when it names a host, else $POD_IP with --listen's port)")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a leader's lease lasts without renewal: the longest take-over time")
	fs.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it steps down (and exits)")
	fs.DurationVar(&f.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often replicas try to take or renew the lease")
	f.sync.register(fs)
	f.notify.register(fs)
	cmd.AddCommand(newTokenCommand(), newVersionCommand(), newDBCommand())
	return cmd
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// advertise is the address other replicas reach this one at.
func advertise(f flags, listen string) (string, error) {
	if f.advertiseAddress != "" {
		return f.advertiseAddress, nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return listen, nil
	}
	if pod := os.Getenv("POD_IP"); pod != "" {
		return net.JoinHostPort(pod, port), nil
	}
	return "", fmt.Errorf("--leader-elect: --listen %s names no host other replicas can reach; set --advertise-address (or POD_IP from the downward API)", listen)
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

func run(ctx context.Context, f flags, stderr io.Writer) error {
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	cfg := daemon.Config{
		Listen:        f.listen,
		TokensFile:    f.tokensFile,
		ShutdownGrace: f.shutdownGrace,
		Version:       version.String(),
		GitRefresh:    f.gitPollInterval,

		MaxRolloutTimeout: f.maxRolloutTimeout,
	}
	gcfg := gogit.Config{
		URL: f.gitURL, Branch: f.gitBranch, Paths: f.gitPaths,
		User: f.gitUser, Email: f.gitEmail, Dir: filepath.Join(f.stateDir, "repo"), Timeout: f.gitTimeout,
		SSHKeyFile: f.gitSSHKeyFile, KnownHostsFile: f.gitSSHKnownHostsFile, AllowInsecure: f.gitAllowInsecure,
	}
	if f.gitSSHKeySecret != "" && f.gitSSHKeyFile != "" {
		return errors.New("invalid configuration: --git-ssh-key-secret and --git-ssh-key-file both name the SSH key; give one")
	}
	if gcfg.SSHKeyFile == "" && f.gitSSHKeySecret == "" {
		gcfg.SSHKeyFile, gcfg.GenerateSSHKey = filepath.Join(f.stateDir, "ssh", "identity"), true
	}
	if f.gitSSHKeySecret != "" {
		// A placeholder for Validate: the key is read from the Secret
		// once the cluster is reachable, below.
		gcfg.SSHKeySource = "the Secret " + f.gitSSHKeySecret
		gcfg.SSHKey = []byte("-")
	}
	proxiesErr := validateWebFlags(f)
	if err := errors.Join(cfg.Validate(), gcfg.Validate(), validateRetryMax(f.gitCloneRetryMax), proxiesErr, f.notify.validate(), validatePprof(f)); err != nil {
		return fmt.Errorf("invalid configuration:\n%w", indent(err))
	}
	if w := gogit.PlaintextWarning(f.gitURL); w != "" {
		log.Warn(w, "component", "git")
	}
	// Ends the clone's retries on any return below.
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	// The health listener answers first thing, saying what fluxd is
	// waiting for until the daemon is built (see startupHealth).
	health := &startupHealth{}
	if f.healthListen != "" {
		hlis, err := net.Listen("tcp", f.healthListen)
		if err != nil {
			return fmt.Errorf("listening for health probes on %s: %w", f.healthListen, err)
		}
		served := make(chan struct{})
		go func() {
			defer close(served)
			if err := serveHTTP(ctx, hlis, health, "health", log); err != nil {
				log.Error("the health listener stopped", "error", err)
			}
		}()
		defer func() { stop(); <-served }()
	}
	health.starting("opening the history database")
	if err := os.MkdirAll(f.stateDir, 0o700); err != nil {
		return fmt.Errorf("creating --state-dir: %w", err)
	}
	if f.historyDB == "" {
		f.historyDB = filepath.Join(f.stateDir, "history.db")
	}
	// A PostgreSQL server that is down is waited for in the background
	// (fluxd reports not ready meanwhile); a SQLite file opens now.
	store, err := historystore.Start(ctx, historystore.Config{URL: f.historyDB, PasswordFile: f.historyDBPasswordFile,
		MaxConns: f.historyDBMaxConns, StatementTimeout: f.historyDBStatementTimeout}, log)
	if err != nil {
		return err
	}
	defer store.Close()
	log.Info("history database", "component", "history", "db", historystore.Redact(f.historyDB))
	tokens, err := auth.Open(cfg.TokensFile)
	if err != nil {
		return err
	}
	warnUnscoped(tokens.Instances(), log)

	kcfg := kube.Config{Kubeconfig: f.kubeconfig, Context: f.kubeContext, Namespaces: f.namespaces, QPS: f.kubeQPS, Burst: f.kubeBurst}
	rc, err := kube.RESTConfig(kcfg)
	if err != nil {
		return err
	}
	cluster, err := kube.New(rc, kcfg)
	if err != nil {
		return err
	}
	health.starting("reaching the Kubernetes API server " + rc.Host)
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	err = cluster.Ping(pingCtx)
	cancel()
	if err != nil {
		return err
	}
	health.starting("syncing the cluster caches")
	cluster.Start(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = cluster.WaitForSync(syncCtx)
	cancel()
	if err != nil {
		return err
	}
	log.Info("watching the cluster", "component", "platform", "host", rc.Host, "namespaces", namespacesOrAll(f.namespaces))

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo())
	notices, sender, err := newNotifier(f.notify, store, reg, log)
	if err != nil {
		return err
	}
	keychains, err := registryKeychains(ctx, cluster, f.registrySecrets, f.registryCredentials)
	if err != nil {
		return err
	}
	images, err := oci.New(oci.Config{
		Metrics: oci.NewMetrics(reg), Log: log,
		DockerConfig: f.dockerConfig, Concurrency: f.registryConcurrency, Platform: f.registryPlatform,
		Keychains:  keychains,
		Cache:      store,
		Rate:       oci.RateConfig{Rate: f.registryRate, Burst: f.registryBurst},
		RecheckMin: f.recheckMin, RecheckMax: f.recheckMax,
		ListMin: f.listMin, ListMax: f.listMax,
		PageSize:    pageSize(f.registryPageSize),
		MaxTagPages: f.registryMaxTagPages, MaxTagListBytes: f.registryMaxTagBytes,
	})
	if err != nil {
		return err
	}

	if f.gitSSHKeySecret != "" && gogit.IsSSH(gcfg.URL) {
		ns, name := secretName(f.gitSSHKeySecret, envOr("POD_NAMESPACE", "default"))
		health.starting("reading the deploy key Secret " + ns + "/" + name)
		key, created, err := cluster.DeployKey(ctx, ns, name, gogit.GenerateKeyPEM)
		if err != nil {
			return fmt.Errorf("--git-ssh-key-secret: %w", err)
		}
		gcfg.SSHKey, gcfg.SSHKeySource = key, "the Secret "+ns+"/"+name
		if created {
			log.Info("generated an SSH deploy key and stored it in its Secret", "component", "git", "secret", ns+"/"+name)
		}
	}
	repo, err := gogit.New(gcfg)
	if err != nil {
		return fmt.Errorf("the git remote: %w", err)
	}
	repo.Instrument(reg)
	if key, ok := repo.DeployKey(); ok {
		// Logged before the clone, which fails until the key is added.
		where := gcfg.SSHKeyFile
		if gcfg.SSHKeySource != "" {
			where = gcfg.SSHKeySource
		}
		log.Info("reaching git over SSH with this deploy key", "component", "git", "key", key.PublicKey, "fingerprint", key.Fingerprint, "kept_in", where)
	}
	// The clone is retried until it succeeds, while fluxd serves: a
	// deploy key can be shown ('fluxctl identity') before it is added.
	// The API listens once the first attempt is over (or has taken
	// --git-timeout), so a remote that answers is cloned before the first
	// call.
	firstTry := make(chan struct{})
	var firstOnce sync.Once
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: f.gitCloneRetryMax}
		err := repo.KeepCloning(ctx, backoff, func(err error, next time.Duration) {
			firstOnce.Do(func() { close(firstTry) })
			log.Warn("cannot clone the manifests yet; fluxd serves and tries again", "component", "git", "error", err, "retry_in", next.Round(time.Millisecond))
		})
		if err == nil {
			log.Info("cloned the manifests", "component", "git", "url", gogit.Redact(gcfg.URL), "branch", gcfg.Branch, "paths", gcfg.Paths)
		}
		return nil
	})
	health.starting("trying the first clone of " + gogit.Redact(gcfg.URL))
	select {
	case <-repo.Cloned():
	case <-firstTry:
	case <-time.After(max(gcfg.Timeout, time.Second)):
	case <-ctx.Done():
		return ctx.Err()
	}
	engine := release.NewEngine(repo, images, cluster, store, log)
	guard := newGuard(ctx, f.sync, rc, log)
	cluster.SetGuard(guard)
	syncs, err := newSyncer(f.sync, syncSource(gcfg.URL, gcfg.Branch, gcfg.Paths), rc, guard, engine, store, reg, log)
	if err != nil {
		return err
	}

	peer, err := f.tls.peer()
	if err != nil {
		return err
	}
	if f.leaderElect && peer == nil {
		log.Warn("followers will not forward calls to the leader, nor pass webhooks on: that needs replica TLS (--tls-cert-file, --tls-key-file, --replica-ca-file); callers of a follower are told to call the leader", "component", "leader")
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w (is another fluxd running there? choose another --listen address)", cfg.Listen, err)
	}
	if lis, err = f.tls.secure(lis, "the API", true, log, "h2"); err != nil {
		return err
	}
	jobs := release.NewQueue(engine, store, f.rolloutTimeout, f.rollbackOnFailure, log)
	jobs.Instrument(release.NewMetrics(reg))
	jobs.NotifyStarts(store)
	auto := automator.New(automator.Config{ShortWait: f.automationShort, LongWait: f.automationLong, MaxBackoff: f.automationMaxBackoff, Metrics: reg, Scopes: tokens.ScopeOf}, engine, jobs, clock.RealClock{}, log)
	jobs.OnEnd(func(history.Job) { auto.Poke() })
	// Ready is what the health service (Kubernetes' readiness probe)
	// reports, besides the git remote's state: the cluster caches and the
	// database.
	ready := func(ctx context.Context) error {
		return errors.Join(daemon.NotReady("cluster", cluster.Ready(ctx)), daemon.NotReady("database", store.Ping(ctx)))
	}
	deps := daemon.Deps{Cluster: cluster, Releaser: engine, Images: images, History: store, Automator: auto, Jobs: jobs, Git: repo, SSHKey: repo, Ready: ready}
	if syncs != nil {
		deps.Sync = syncs
	}
	d := daemon.New(cfg, deps, log)
	engine.OnRevision(d.GitMoved)
	registerGitMetrics(reg, repo)
	srv := daemon.NewServer(d, tokens, log, daemon.WithMetrics(reg))
	// Only the leader runs jobs and automation: first it carries on with
	// the jobs a previous leader (or run) left live.
	lead := func(ctx context.Context) {
		// Nothing to lead before the manifests are cloned.
		select {
		case <-repo.Cloned():
		case <-ctx.Done():
			return
		}
		if err := store.Wait(ctx); err != nil {
			return
		}
		if err := jobs.Recover(ctx); err != nil {
			log.Error("cannot carry on with the jobs a previous fluxd left; they stay as they are", "error", err)
		}
		done := make(chan struct{})
		go func() { jobs.Run(ctx); close(done) }()
		sent := make(chan struct{})
		go func() { sender.Run(ctx); close(sent) }()
		defer func() { <-sent }()
		if syncs != nil {
			syncDone := make(chan struct{})
			go func() { syncs.Run(ctx); close(syncDone) }()
			defer func() { <-syncDone }()
		}
		auto.Run(ctx)
		<-done
	}
	var raw [4]byte
	_, _ = rand.Read(raw[:])
	self := lis.Addr().String()
	if f.leaderElect {
		if self, err = advertise(f, lis.Addr().String()); err != nil {
			return err
		}
	}
	// The webhook listener, whose address followers pass notifications
	// on to when this replica leads.
	var (
		wh        *daemon.WebhookHandler
		wlis      net.Listener
		webhookAt string
	)
	if f.webhookListen != "" {
		secret, err := os.ReadFile(f.webhookSecretFile)
		if err != nil {
			return fmt.Errorf("--webhook-listen needs --webhook-secret-file, a file holding the shared secret: %w", err)
		}
		if wh, err = daemon.NewWebhookHandler(d, []byte(strings.TrimSpace(string(secret))), log); err != nil {
			return fmt.Errorf("--webhook-secret-file %s: %w", f.webhookSecretFile, err)
		}
		wh.RequireTimestamp = f.webhookRequireTimestamp
		if wlis, err = net.Listen("tcp", f.webhookListen); err != nil {
			return fmt.Errorf("listening for webhooks on %s: %w", f.webhookListen, err)
		}
		if wlis, err = f.tls.secure(wlis, "webhooks", false, log, "http/1.1"); err != nil {
			return err
		}
		host, _, _ := net.SplitHostPort(self)
		_, port, _ := net.SplitHostPort(wlis.Addr().String())
		webhookAt = net.JoinHostPort(host, port)
	}
	leadership := kube.NewLeadership(self, hex.EncodeToString(raw[:]), webhookAt)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fluxd_leader", Help: "1 while this replica leads (runs automation and jobs)."}, func() float64 {
		if leadership.IsLeader() {
			return 1
		}
		return 0
	}))
	if f.webListen != "" {
		// Before the jobs run: it sets the queue's hooks.
		if err := startWeb(ctx, g, f, srv, d, jobs, auto, tokens, store, log); err != nil {
			return err
		}
	}
	if f.leaderElect {
		ecfg := kube.ElectionConfig{Namespace: f.leaderNamespace, Name: f.leaderName, Address: self,
			LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod}
		if err := ecfg.Validate(); err != nil {
			return err
		}
		srv.FollowLeader(self, leadership, peer)
		if peer != nil {
			// A forwarded call is taken only with a replica certificate.
			srv.RequireReplicaCerts(peer.RootCAs)
		}
		g.Go(func() error {
			// Campaign only once cloned: a replica that cannot reach git
			// would hold the Lease and lead nothing (lead waits for the
			// clone), while a replica that can clone waited behind it.
			select {
			case <-repo.Cloned():
			case <-ctx.Done():
				return nil
			}
			return cluster.Elect(ctx, ecfg, leadership, lead, log)
		})
	} else {
		leadership.SetLeader()
		g.Go(func() error { lead(ctx); return nil })
	}
	g.Go(func() error { return srv.Serve(ctx, lis, cfg.ShutdownGrace*4/5) })
	g.Go(func() error { runWatcher(ctx, notices); return nil })
	g.Go(func() error {
		select {
		case <-repo.Cloned():
			pollGit(ctx, engine, f.gitPollInterval, log)
		case <-ctx.Done():
		}
		return nil
	})
	health.serve(d.HealthHandlerWith(tokens))
	if wh != nil {
		if f.leaderElect {
			wh.FollowLeader(leadership, peer)
			if peer != nil {
				wh.RequireReplicaCerts(peer.RootCAs)
			}
		}
		g.Go(func() error { wh.Run(ctx); return nil })
		g.Go(func() error { return serveHTTP(ctx, wlis, wh, "webhooks", log) })
	}
	if f.metricsListen != "" {
		mlis, err := net.Listen("tcp", f.metricsListen)
		if err != nil {
			return fmt.Errorf("listening for metrics on %s: %w", f.metricsListen, err)
		}
		if mlis, err = f.tls.secure(mlis, "metrics", false, log, "http/1.1"); err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if f.pprof {
			servePprof(mux)
		}
		g.Go(func() error { return serveHTTP(ctx, mlis, mux, "metrics", log) })
	}
	log.Info("fluxd started", "version", cfg.Version, "listen", lis.Addr().String())
	// A stop is bounded: whatever has not ended --shutdown-grace after
	// the signal is abandoned (running jobs are left live in the store for
	// the next fluxd, so nothing is lost), well before Kubernetes' own
	// SIGKILL 30 s after its SIGTERM.
	go func() {
		<-ctx.Done()
		time.Sleep(cfg.ShutdownGrace)
		log.Error("fluxd did not stop within --shutdown-grace; exiting now", "grace", cfg.ShutdownGrace)
		os.Exit(1)
	}()
	err = g.Wait()
	log.Info("fluxd stopped")
	return err
}

func namespacesOrAll(ns []string) string {
	if len(ns) == 0 {
		return "all"
	}
	return strings.Join(ns, ",")
}

func indent(err error) error {
	return fmt.Errorf("  - %s", strings.ReplaceAll(err.Error(), "\n", "\n  - "))
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fluxd's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.String())
		},
	}
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

// newHTTPServer is the server of the webhook and metrics listeners. Every
// phase of a request is bounded, so that a client that sends or reads
// slowly cannot hold connections open: a webhook's body is at most 1 MiB,
// a metrics page is generated at once, and neither keeps a connection
// idle for long.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// serveHTTP serves h on lis until ctx ends.
func serveHTTP(ctx context.Context, lis net.Listener, h http.Handler, what string, log *slog.Logger) error {
	srv := newHTTPServer(h)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("serving "+what, "component", what, "address", lis.Addr().String())
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s: %w", what, err)
	}
	return nil
}

// pageSize maps --registry-page-size to oci.Config.PageSize, where 0 sends
// no n at all.
func pageSize(flag int) int {
	if flag == 0 {
		return -1
	}
	return flag
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

func validateRetryMax(d time.Duration) error {
	if d < time.Second {
		return fmt.Errorf("--git-clone-retry-max %v is under the first wait of 1s", d)
	}
	return nil
}

// buildInfo is fluxd_build_info{version,revision,go_version}, always 1: which
// build a replica runs, for dashboards and alerts across a rollout.
func buildInfo() prometheus.Collector {
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fluxd_build_info", Help: "fluxd's build: its version, source revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": version.String(), "revision": revision, "go_version": runtime.Version()}})
	g.Set(1)
	return g
}
