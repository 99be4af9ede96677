package main

import (
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/internal/memlimit"
	"github.com/fluxd/fluxd/registry/oci"
	"github.com/fluxd/fluxd/webhook"
)

// flags are the daemon's command-line flags; configure turns them into
// the components' Configs (config.go).
type flags struct {
	listen                    string
	tokensFile                string
	shutdownGrace             time.Duration
	logLevel                  string
	logFormat                 string
	kubeconfig                string
	kubeContext               string
	clusterName               string
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
	memoryLimitRatio          float64
	gcPercent                 int
	webhookListen             string
	webListen                 string
	webAllowWithoutClientCert bool
	webSecureCookie           bool
	trustedProxies            []string
	webTrustedProxies         []string // deprecated name of trustedProxies
	gitWebURL                 string
	webhookSecretFile         string
	approveWebhookSecretFile  string
	approveWebhookKey         string
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
	verify verifyFlags
}

// register defines every flag of fluxd on fs, with its default and help.
func (f *flags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "listen", "127.0.0.1:3030", "TCP address of the gRPC API")
	fs.StringVar(&f.tokensFile, "tokens-file", "", "file of hashed API tokens (see 'fluxd token create')")
	fs.DurationVar(&f.shutdownGrace, "shutdown-grace", 10*time.Second, "how long in-flight calls may finish on shutdown")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&f.kubeContext, "context", "", "kubeconfig context (default: its current context)")
	fs.StringVar(&f.clusterName, "cluster-name", "", "this fluxd's cluster, when fluxds of several clusters share one --history-db (docs/promotion.md, \"Across clusters\"): its release jobs' IDs carry it, and it runs only its own cluster's jobs; lowercase letters, digits, '-'; default: none (one cluster)")
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
	fs.Float64Var(&f.memoryLimitRatio, "memory-limit-ratio", memlimit.DefaultRatio, "the share of the container's memory limit (its cgroup's) that fluxd's Go runtime keeps its memory under (a soft limit: the collector works harder as it nears it); 0 to leave the runtime's default. An explicit GOMEMLIMIT wins")
	fs.IntVar(&f.gcPercent, "gc-percent", defaultGCPercent, "the garbage collector's target, as GOGC: a collection starts when the heap has grown by this percentage of the live heap (10 to 1000). 50 rather than Go's 100: at 10,000 workloads the live heap is small but start-up makes much garbage, and 50 aims to keep RSS under 300 MB even without a memory limit, at the cost of more frequent collections. A valid GOGC wins")
	fs.BoolVar(&f.pprof, "pprof", false, "also serve Go's profiles (net/http/pprof) at /debug/pprof/ on --metrics-listen: CPU, heap, allocations, goroutines; unauthenticated like the metrics")
	fs.StringVar(&f.webhookListen, "webhook-listen", "", "address for registry push webhooks at POST /v1/notify (default: off)")
	fs.StringVar(&f.webListen, "web-listen", "", "address for the status page, e.g. 127.0.0.1:3031 (default: off); sign in with an API token. With --tls-client-ca-file it requires client certificates as the API does")
	fs.BoolVar(&f.webSecureCookie, "web-secure-cookie", false, "the status page is reached over HTTPS through a TLS-terminating proxy: make its session cookie Secure (named __Host-fluxd_session) and send HSTS, as under --tls-cert-file")
	fs.StringVar(&f.gitWebURL, "git-web-url", "", "prefix of the forge's commit pages, such that PREFIX/COMMIT is a commit's page (e.g. https://github.com/org/repo/commit): the status page links commits there")
	fs.StringSliceVar(&f.trustedProxies, "trusted-proxies", nil, "CIDRs (or addresses) of the proxies in front of the status page and the webhook listener, e.g. an Ingress controller's pod network: a request's client is read from their X-Forwarded-For, for the per-client limits (failed sign-ins, signed webhook reads); the API's connections from them count against the total only, not per client; default none, the connection's address")
	fs.StringSliceVar(&f.webTrustedProxies, "web-trusted-proxies", nil, "the former name of --trusted-proxies")
	_ = fs.MarkDeprecated("web-trusted-proxies", "use --trusted-proxies, which also covers the webhook listener and the API")
	fs.BoolVar(&f.webAllowWithoutClientCert, "web-allow-without-client-cert", false, "with --tls-client-ca-file: serve the status page without asking for a client certificate (the API still requires one; a token is still needed)")
	fs.StringVar(&f.webhookSecretFile, "webhook-secret-file", "", "file holding the webhooks' shared secret (required with --webhook-listen)")
	fs.StringVar(&f.approveWebhookSecretFile, "approve-webhook-secret-file", "", "file holding the secret CI signs promotion approvals with (POST "+webhook.ApprovePath+" on --webhook-listen; docs/promotion.md); empty: no approval webhook")
	fs.StringVar(&f.approveWebhookKey, "approve-webhook-key", "ci", "the approval webhook's name in a stage's approvers (webhook:KEY): one secret counts as one approver")
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
	f.verify.register(fs)
}

// envOr is the environment variable key, or def when it is empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
