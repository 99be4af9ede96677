package gogit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/internal/giturl"
)

// Config is the repository fluxd releases through.
type Config struct {
	// URL is the remote: file://, http(s):// (credentials may be in the
	// URL's user info; they are never logged or shown), or SSH
	// (ssh://[user@]host[:port]/path or user@host:path; the user
	// defaults to git).
	URL string
	// Branch is the branch to follow and push to.
	Branch string
	// Paths are the sub-paths holding manifests; empty means the root.
	Paths []string
	// User and Email sign fluxd's commits as committer.
	User, Email string
	// Dir is where the working clone lives; it is replaced on Open.
	Dir string
	// Timeout bounds every network operation (fetch, push; a clone gets
	// four times as long): a remote that stops answering fails the
	// operation instead of holding fluxd. Default DefaultTimeout.
	Timeout time.Duration

	// SSHKeyFile is the private key an SSH remote is reached with.
	SSHKeyFile string
	// GenerateSSHKey makes Open create an ed25519 key at SSHKeyFile (and
	// its public half at SSHKeyFile.pub) when there is none there; it is
	// kept and used from then on.
	GenerateSSHKey bool
	// SSHKey, when set, is the private key itself (OpenSSH PEM), used
	// instead of SSHKeyFile; SSHKeySource says where it came from, for
	// messages (e.g. "the Secret fluxd/fluxd-ssh").
	SSHKey       []byte
	SSHKeySource string
	// KnownHostsFile lists the host keys an SSH remote may present, in
	// OpenSSH's known_hosts form. Required for an SSH remote: a host
	// whose key it does not list is refused, never accepted.
	KnownHostsFile string
	// AllowInsecure accepts a plaintext remote (http://, git://) on
	// another host (--git-allow-insecure); without it Validate refuses
	// one. A loopback remote is always accepted.
	AllowInsecure bool
}

// PokeInterval is the least time between two clone attempts that calls
// needing git start ahead of KeepCloning's backoff: callers cannot make
// fluxd clone back to back.
const PokeInterval = 5 * time.Second

// DefaultTimeout bounds a git network operation when Config.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// Validate reports every problem with the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.URL == "" {
		errs = append(errs, errors.New("--git-url is empty"))
	} else if _, err := transport.NewEndpoint(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("--git-url %s is not a git URL: %s (the URL's credentials are not shown)", Redact(c.URL), giturl.RedactError(c.URL, err)))
	} else if err := checkPlaintext(c.URL, c.AllowInsecure); err != nil {
		errs = append(errs, err)
	}
	if c.Branch == "" {
		errs = append(errs, errors.New("--git-branch is empty"))
	}
	if c.User == "" || c.Email == "" {
		errs = append(errs, errors.New("--git-user and --git-email must both be set"))
	} else if err := (gitrepo.Signature{Name: c.User, Email: c.Email}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--git-user or --git-email: %w", err))
	}
	for _, p := range c.Paths {
		if filepath.IsAbs(p) || strings.HasPrefix(filepath.Clean(p), "..") {
			errs = append(errs, fmt.Errorf("--git-path %q must be relative and inside the repository", p))
		}
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("the working clone's directory is empty"))
	}
	if c.Timeout < 0 {
		errs = append(errs, errors.New("--git-timeout must not be negative"))
	}
	if IsSSH(c.URL) {
		if c.KnownHostsFile == "" {
			errs = append(errs, errors.New("--git-ssh-known-hosts-file is required with an SSH --git-url: fluxd connects only to hosts whose key it lists (write it with ssh-keyscan, after checking the fingerprints out of band)"))
		} else if _, err := os.Stat(c.KnownHostsFile); err != nil {
			errs = append(errs, fmt.Errorf("--git-ssh-known-hosts-file: %w", err))
		}
		if c.SSHKeyFile == "" && len(c.SSHKey) == 0 {
			errs = append(errs, errors.New("an SSH --git-url needs a key: --git-ssh-key-file, or a generated one in --state-dir"))
		}
	}
	return errors.Join(errs...)
}

// Repo is a working clone. Its methods are safe for concurrent use; they
// run one at a time, and waiting for one another ends with the caller's
// context.
type Repo struct {
	cfg  Config
	auth transport.AuthMethod
	// deployKey is the public half of the SSH key, nil for other remotes.
	deployKey *gitrepo.DeployKey

	// cloneURL is the URL without its credentials, which are in auth.
	cloneURL string

	lock *semaphore.Weighted
	repo *git.Repository // nil until Clone succeeds; guarded by lock

	cloned chan struct{} // closed when Clone succeeds
	poke   chan struct{} // makes KeepCloning try at once; buffered, one
	// pokes bounds how often calls may make KeepCloning try at once (any
	// token holder's call can): at most once per PokeInterval.
	pokes *rate.Limiter

	mu       sync.Mutex // guards status and cloneErr
	status   gitrepo.RemoteStatus
	cloneErr error // the last Clone's error

	// ops times network operations by kind and result; nil: not timed.
	ops *prometheus.HistogramVec

	// snaps are the revisions' snapshots readers read (see Snapshot).
	snaps snapshots
}

// Instrument times the clone's network operations in
// fluxd_git_operation_duration_seconds{operation,result}. Call it before
// the Repo is shared.
func (r *Repo) Instrument(reg prometheus.Registerer) {
	r.ops = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fluxd_git_operation_duration_seconds",
		Help:    "Git network operations (clone, fetch, push) by result (ok, error): how long they took; the count with result=error counts failures.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120},
	}, []string{"operation", "result"})
	reg.MustRegister(r.ops)
	for _, op := range []string{"clone", "fetch", "push"} {
		for _, res := range []string{"ok", "error"} {
			r.ops.WithLabelValues(op, res)
		}
	}
}

// acquire waits for the clone until ctx ends.
func (r *Repo) acquire(ctx context.Context) error {
	if err := r.lock.Acquire(ctx, 1); err != nil {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("waiting for another git operation on %s to finish: %w", Redact(r.cfg.URL), err),
			"The git operation before this one is still running: the remote may be slow or not answering. Try again shortly.")
	}
	return nil
}

func (r *Repo) release() { r.lock.Release(1) }

// network runs a network operation under the configured timeout, keeping
// the remote's status current.
//
// op is given the proxy option to pass to go-git: for an SSH remote it
// binds the connection to ctx (see boundConnection), since go-git bounds
// only the SSH remote's TCP dial; for others it is empty.
func (r *Repo) network(ctx context.Context, doing string, scale int, op func(ctx context.Context, px transport.ProxyOptions) error) error {
	timeout := r.cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout*time.Duration(scale))
	defer cancel()
	r.mu.Lock()
	start := time.Now()
	r.status.Waiting, r.status.WaitingSince, r.status.WaitingFor = doing, start, timeout*time.Duration(scale)
	r.mu.Unlock()
	var px transport.ProxyOptions
	if r.deployKey != nil {
		var done func()
		px, done = boundConnection(ctx)
		defer done()
	}
	err := op(ctx, px)
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		err = nil
	}
	if r.ops != nil {
		result := "ok"
		if err != nil {
			result = "error"
		}
		r.ops.WithLabelValues(map[string]string{"cloning": "clone", "fetching": "fetch", "pushing": "push"}[doing], result).Observe(time.Since(start).Seconds())
	}
	if err != nil && ctx.Err() == context.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("%w (after %v: %v)", context.DeadlineExceeded, timeout*time.Duration(scale), err)
	}
	r.mu.Lock()
	r.status.Waiting = ""
	if err == nil {
		r.status.LastSync, r.status.Error = time.Now(), ""
	} else {
		if r.status.Error == "" {
			r.status.ErrorSince = time.Now()
		}
		r.status.Error = fmt.Sprintf("%s %s: %v", doing, Redact(r.cfg.URL), err)
	}
	r.mu.Unlock()
	return err
}

// Status reports how the remote has answered lately.
func (r *Repo) Status() gitrepo.RemoteStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Redact replaces the credentials in a git URL, for messages and logs.
// It is giturl.Redact, where fluxd's URL redaction lives.
func Redact(raw string) string { return giturl.Redact(raw) }

// Open clones the remote into cfg.Dir, replacing whatever is there: New,
// then one Clone.
func Open(ctx context.Context, cfg Config) (*Repo, error) {
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := r.Clone(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// New prepares the working clone of cfg's remote without reaching it: the
// SSH key is read (or generated) here, so that its public half can be
// shown while the remote still refuses it. Clone or KeepCloning make the
// clone; until then every operation fails saying why git cannot be read.
func New(cfg Config) (*Repo, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Repo{cfg: cfg, lock: semaphore.NewWeighted(1), cloned: make(chan struct{}), poke: make(chan struct{}, 1), cloneURL: cfg.URL,
		pokes: rate.NewLimiter(rate.Every(PokeInterval), 1)}
	r.status.NotCloned = true
	if u, err := url.Parse(cfg.URL); err == nil && u.User != nil && (u.Scheme == "http" || u.Scheme == "https") {
		pw, _ := u.User.Password()
		r.auth = &http.BasicAuth{Username: u.User.Username(), Password: pw}
		u.User = nil
		r.cloneURL = u.String()
	}
	if IsSSH(cfg.URL) {
		auth, key, err := newSSHAuth(cfg)
		if err != nil {
			return nil, fluxerr.New(fluxerr.User, err, "")
		}
		r.auth, r.deployKey = auth, &key
	}
	return r, nil
}

// remoteError explains a failure to reach or write to the remote.
func (r *Repo) remoteError(doing string, err error) error {
	msg := fmt.Errorf("%s %s (branch %s): %w", doing, Redact(r.cfg.URL), r.cfg.Branch, err)
	help := "Check that the URL is right and reachable from fluxd, that the branch exists, and that the credentials (if any) may read and write it."
	if sshMsg, sshHelp := r.sshError(err); sshMsg != nil {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("%s %s (branch %s): %w", doing, Redact(r.cfg.URL), r.cfg.Branch, sshMsg), sshHelp)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		help = "The remote did not answer in time (--git-timeout). Check that it is up and reachable from fluxd; fluxd keeps serving from its last copy and tries again."
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		help = "The remote refused fluxd's credentials. Check the token or password in --git-url (it is not shown here) and that it may push to the branch."
	case errors.Is(err, transport.ErrRepositoryNotFound):
		help = "There is no repository at that URL, or fluxd's credentials may not see it."
	case errors.Is(err, plumbing.ErrReferenceNotFound), strings.Contains(err.Error(), "couldn't find remote ref"):
		help = fmt.Sprintf("The branch %q does not exist on the remote; check --git-branch.", r.cfg.Branch)
	}
	return fluxerr.New(fluxerr.Unavailable, msg, help)
}

// DeployKey is the public half of the SSH key fluxd reaches the remote
// with; false when the remote is not an SSH one.
func (r *Repo) DeployKey() (gitrepo.DeployKey, bool) {
	if r.deployKey == nil {
		return gitrepo.DeployKey{}, false
	}
	key := *r.deployKey
	key.Remote = Redact(r.cfg.URL)
	return key, true
}

// Dir is the working clone's root directory.
func (r *Repo) Dir() string { return r.cfg.Dir }

// Paths are the configured manifest sub-paths.
func (r *Repo) Paths() []string { return r.cfg.Paths }
