package gogit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
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
		errs = append(errs, fmt.Errorf("--git-url %s is not a git URL: %s (the URL's credentials are not shown)", Redact(c.URL), redactError(c.URL, err)))
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

// Redact replaces the password or token in a URL, for messages and logs.
// A lone user name is replaced too, since it is often a token. A URL that
// does not parse keeps only what cannot be a credential. An SSH URL's
// lone user name (git@host:path) is shown: SSH authenticates with the key.
func Redact(raw string) string {
	if IsSSH(raw) && !strings.ContainsAny(raw, "?#") {
		if info, _, ok := cutUserInfo(raw); !ok || !strings.Contains(info, ":") {
			return strings.Map(printable, raw)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return redactUnparsed(raw)
	}
	if u.Opaque != "" {
		// "user:token@host:path" parses as the scheme "user" and the
		// opaque rest.
		if at := strings.LastIndex(u.Opaque, "@"); at >= 0 {
			return "redacted@" + u.Opaque[at+1:]
		}
		return raw
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted" // ?private_token=... and the like
	}
	if u.User == nil {
		return u.String()
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	} else {
		u.User = url.User("redacted")
	}
	return u.String()
}

// redactUnparsed shows what follows the user info of a URL that does not
// parse, or nothing but its scheme when where the user info ends cannot
// be told: the parse may have failed inside a password.
func redactUnparsed(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	} else {
		scheme += "://"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "redacted@" + strings.Map(printable, rest[at+1:]) + " (unparseable URL)"
	}
	if ok {
		return scheme + "… (unparseable URL)"
	}
	return "(unparseable URL)"
}

func printable(r rune) rune {
	if r < ' ' || r == 0x7f {
		return '?'
	}
	return r
}

// quoted matches what Go's errors quote with %q.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// redactError is err's message with raw's credentials taken out: the
// errors of url.Parse and transport.NewEndpoint quote the URL, or parts
// of it such as a "port" that is really a password.
func redactError(raw string, err error) string {
	msg := strings.ReplaceAll(err.Error(), raw, Redact(raw))
	msg = quoted.ReplaceAllString(msg, "(not shown)")
	msg = strings.TrimPrefix(msg, "parse (not shown): ")
	for _, secret := range secrets(raw) {
		msg = strings.ReplaceAll(msg, secret, "redacted")
	}
	return msg
}

// cutUserInfo splits raw at the last "@" after its scheme.
func cutUserInfo(raw string) (info, rest string, ok bool) {
	_, after, found := strings.Cut(raw, "://")
	if !found {
		after = raw
	}
	at := strings.LastIndex(after, "@")
	if at < 0 {
		return "", after, false
	}
	return after[:at], after[at+1:], true
}

// secrets are the strings of raw that may be credentials: its user info
// (everything before the last "@" after the scheme), its parts around the
// first ":", and their unescaped forms.
func secrets(raw string) []string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		rest = raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return nil
	}
	info := rest[:at]
	user, pass, hasPass := strings.Cut(info, ":")
	if hasPass {
		user = "" // a user name beside a password is not the secret
	}
	var out []string
	for _, s := range []string{info, pass, user} {
		if s == "" {
			continue
		}
		out = append(out, s)
		if u, err := url.PathUnescape(s); err == nil && u != s {
			out = append(out, u)
		}
	}
	return out
}

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

// Clone clones the remote into cfg.Dir, replacing whatever is there. Once
// it has succeeded it does nothing. A clone whose --git-path is missing
// counts as failed: the path may be pushed later.
func (r *Repo) Clone(ctx context.Context) error {
	if err := r.acquire(ctx); err != nil {
		return err
	}
	defer r.release()
	if r.repo != nil {
		return nil
	}
	err := r.clone(ctx)
	r.mu.Lock()
	r.cloneErr = err
	if fe := (*fluxerr.Error)(nil); errors.As(err, &fe) {
		// The explained error, which names the key to add, rather than
		// the transport's.
		r.status.Error = fe.Err.Error()
	}
	r.mu.Unlock()
	return err
}

func (r *Repo) clone(ctx context.Context) error {
	if err := os.RemoveAll(r.cfg.Dir); err != nil {
		return err
	}
	if err := os.RemoveAll(r.snapshotRoot()); err != nil {
		return err
	}
	var repo *git.Repository
	err := r.network(ctx, "cloning", 4, func(ctx context.Context, px transport.ProxyOptions) (err error) {
		repo, err = git.PlainCloneContext(ctx, r.cfg.Dir, false, &git.CloneOptions{
			URL:           r.cloneURL,
			Auth:          r.auth,
			ProxyOptions:  px,
			ReferenceName: plumbing.NewBranchReferenceName(r.cfg.Branch),
			SingleBranch:  true,
		})
		return err
	})
	if err != nil {
		return r.remoteError("cloning", err)
	}
	if _, err := gitrepo.ResolvePaths(r.cfg.Dir, r.cfg.Paths); err != nil {
		return fluxerr.New(fluxerr.User, err, "Push the path to the branch, or correct --git-path.")
	}
	r.repo = repo
	r.mu.Lock()
	if head, err := repo.Head(); err == nil {
		r.status.Revision = head.Hash().String()
	}
	r.status.NotCloned = false
	r.mu.Unlock()
	close(r.cloned)
	return nil
}

// Cloned is closed once the clone is made.
func (r *Repo) Cloned() <-chan struct{} { return r.cloned }

// KeepCloning calls Clone until it succeeds or ctx ends, waiting between
// attempts as b says (with b.Steps large and b.Cap set, the wait grows to
// the cap and stays there); a call that needed the clone makes it try at
// once. failed is told each failure and the wait before the next try.
func (r *Repo) KeepCloning(ctx context.Context, b wait.Backoff, failed func(err error, next time.Duration)) error {
	delay := b.DelayFunc()
	for {
		err := r.Clone(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		next := delay()
		if failed != nil {
			failed(err, next)
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		case <-r.poke:
			t.Stop()
		}
	}
}

// notCloned is the error of an operation that needs the clone before it
// is made: why it is not (the last attempt's error and its help), and
// that fluxd keeps trying. It makes KeepCloning try again at once.
func (r *Repo) notCloned() error {
	if r.pokes.Allow() {
		select {
		case r.poke <- struct{}{}:
		default:
		}
	}
	r.mu.Lock()
	last := r.cloneErr
	r.mu.Unlock()
	const retrying = "fluxd keeps trying to clone by itself (and tries again at once after a call like this one); it needs no restart."
	if last == nil {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd cannot read git yet: it is still cloning %s (branch %s)", Redact(r.cfg.URL), r.cfg.Branch),
			"The first clone has not finished. Try again in a moment; "+retrying)
	}
	var fe *fluxerr.Error
	if errors.As(last, &fe) {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd cannot read git yet: %w", fe.Err), strings.TrimSpace(fe.Help+"\n"+retrying))
	}
	return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd cannot read git yet: %w", last), retrying)
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

// Sync fetches the remote branch and resets the clone to it, returning
// the revision now checked out.
func (r *Repo) Sync(ctx context.Context) (string, error) {
	if err := r.acquire(ctx); err != nil {
		return "", err
	}
	defer r.release()
	if r.repo == nil {
		return "", r.notCloned()
	}
	return r.sync(ctx)
}

func (r *Repo) sync(ctx context.Context) (string, error) {
	remoteRef := plumbing.NewRemoteReferenceName("origin", r.cfg.Branch)
	err := r.network(ctx, "fetching", 1, func(ctx context.Context, px transport.ProxyOptions) error {
		return r.repo.FetchContext(ctx, &git.FetchOptions{
			Auth:         r.auth,
			ProxyOptions: px,
			RefSpecs:     []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/%s:%s", r.cfg.Branch, remoteRef))},
			Force:        true,
		})
	})
	if err != nil {
		return "", r.remoteError("fetching", err)
	}
	ref, err := r.repo.Reference(remoteRef, true)
	if err != nil {
		return "", r.remoteError("reading", err)
	}
	if err := r.resetTo(ref.Hash()); err != nil {
		return "", err
	}
	r.mu.Lock()
	r.status.Revision = ref.Hash().String()
	r.mu.Unlock()
	return ref.Hash().String(), nil
}

func (r *Repo) resetTo(h plumbing.Hash) error {
	wt, err := r.repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.Reset(&git.ResetOptions{Commit: h, Mode: git.HardReset}); err != nil {
		return fmt.Errorf("resetting the working clone to %s: %w", h, err)
	}
	return nil
}

// Head returns the revision checked out.
func (r *Repo) Head() (string, error) {
	if err := r.acquire(context.Background()); err != nil {
		return "", err
	}
	defer r.release()
	if r.repo == nil {
		return "", r.notCloned()
	}
	h, err := r.repo.Head()
	if err != nil {
		return "", err
	}
	return h.Hash().String(), nil
}

// Commit writes files (paths relative to the root) on top of the revision
// base and commits them locally as one commit authored by author. If base
// is no longer the remote's head, nothing is committed and the error is a
// Precondition. The commit reaches the remote only through Push; the next
// Sync discards a commit that was never pushed.
func (r *Repo) Commit(ctx context.Context, base string, files map[string][]byte, message string, author gitrepo.Signature) (string, error) {
	if err := r.acquire(ctx); err != nil {
		return "", err
	}
	defer r.release()
	if r.repo == nil {
		return "", r.notCloned()
	}
	head, err := r.sync(ctx)
	if err != nil {
		return "", err
	}
	if head != base {
		return "", fluxerr.New(fluxerr.Precondition,
			fmt.Errorf("%w: the branch %s moved from %.12s to %.12s while the release was being prepared", gitrepo.ErrMoved, r.cfg.Branch, base, head),
			"Someone pushed in the meantime. Plan the release again; it will be computed from the new revision.")
	}
	if author.Name == "" {
		author = gitrepo.Signature{Name: r.cfg.User, Email: r.cfg.Email}
	}
	if author.Email == "" {
		author.Email = r.cfg.Email
	}
	if err := author.Validate(); err != nil {
		return "", fluxerr.New(fluxerr.User, fmt.Errorf("committing: %w", err),
			"A commit's author is one line of git's headers: give a plain name, without newlines or angle brackets. Nothing was committed.")
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		return "", err
	}
	undo := func() { _ = r.resetTo(plumbing.NewHash(head)) }
	for rel, content := range files {
		p := filepath.Join(r.cfg.Dir, rel)
		if !strings.HasPrefix(p, filepath.Clean(r.cfg.Dir)+string(filepath.Separator)) {
			undo()
			return "", fmt.Errorf("refusing to write %q outside the repository", rel)
		}
		if err := r.checkWritable(rel); err != nil {
			undo()
			return "", err
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			undo()
			return "", err
		}
		if _, err := wt.Add(filepath.ToSlash(rel)); err != nil {
			undo()
			return "", err
		}
	}
	now := time.Now()
	h, err := wt.Commit(message, &git.CommitOptions{
		Author:    &object.Signature{Name: author.Name, Email: author.Email, When: now},
		Committer: &object.Signature{Name: r.cfg.User, Email: r.cfg.Email, When: now},
	})
	if err != nil {
		undo()
		return "", fmt.Errorf("committing: %w", err)
	}
	return h.String(), nil
}

// checkWritable refuses to write rel through a symbolic link, in the file
// itself or in any directory above it inside the clone: the repository's
// content is not fluxd's to trust, and a link would make fluxd write
// outside the clone. A file that does not exist yet is fine.
func (r *Repo) checkWritable(rel string) error {
	p := filepath.Clean(r.cfg.Dir)
	for _, part := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", rel, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fluxerr.New(fluxerr.User, fmt.Errorf("refusing to write %s: %s is a symbolic link in the repository", rel, filepath.ToSlash(strings.TrimPrefix(p, filepath.Clean(r.cfg.Dir)+string(filepath.Separator)))),
				"fluxd edits only regular files inside its clone. Replace the link with the file it points to. Nothing was committed.")
		}
	}
	return nil
}

// Push pushes commit to the branch. Only a fast-forward is pushed, never a
// force: if the remote moved, the error wraps gitrepo.ErrMoved. On any
// failure the clone is reset to the remote, so the commit is not kept.
func (r *Repo) Push(ctx context.Context, commit string) error {
	if err := r.acquire(ctx); err != nil {
		return err
	}
	defer r.release()
	if r.repo == nil {
		return r.notCloned()
	}
	h := plumbing.NewHash(commit)
	err := r.network(ctx, "pushing", 1, func(ctx context.Context, px transport.ProxyOptions) error {
		return r.repo.PushContext(ctx, &git.PushOptions{
			Auth:         r.auth,
			ProxyOptions: px,
			RefSpecs:     []config.RefSpec{config.RefSpec(fmt.Sprintf("%s:refs/heads/%s", h, r.cfg.Branch))},
		})
	})
	if err != nil {
		remoteRef, rerr := r.repo.Reference(plumbing.NewRemoteReferenceName("origin", r.cfg.Branch), true)
		if rerr == nil {
			_ = r.resetTo(remoteRef.Hash())
		}
		if errors.Is(err, git.ErrNonFastForwardUpdate) || strings.Contains(err.Error(), "non-fast-forward") || strings.Contains(err.Error(), "fetch first") {
			return fluxerr.New(fluxerr.Precondition, fmt.Errorf("%w: pushing to %s: %v", gitrepo.ErrMoved, Redact(r.cfg.URL), err), "Someone pushed in the meantime.")
		}
		return r.remoteError("pushing to", err)
	}
	// Keep the remote-tracking ref current, so the next sync is a no-op.
	_ = r.repo.Storer.SetReference(plumbing.NewHashReference(plumbing.NewRemoteReferenceName("origin", r.cfg.Branch), h))
	r.mu.Lock()
	r.status.Revision = commit
	r.mu.Unlock()
	return nil
}

// FindCommit returns the newest of the last depth commits on the remote
// branch whose message contains line as a line of its own (a trailer such
// as "Fluxd-Job: 1234"), or "" when none does. It reads the clone as last
// synced; call Sync first.
func (r *Repo) FindCommit(ctx context.Context, line string, depth int) (string, error) {
	if err := r.acquire(ctx); err != nil {
		return "", err
	}
	defer r.release()
	if r.repo == nil {
		return "", r.notCloned()
	}
	ref, err := r.repo.Reference(plumbing.NewRemoteReferenceName("origin", r.cfg.Branch), true)
	if err != nil {
		return "", r.remoteError("reading", err)
	}
	iter, err := r.repo.Log(&git.LogOptions{From: ref.Hash()})
	if err != nil {
		return "", fmt.Errorf("reading the history of %s: %w", r.cfg.Branch, err)
	}
	defer iter.Close()
	for i := 0; i < depth; i++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		c, err := iter.Next()
		if err != nil {
			break // io.EOF: the start of history
		}
		if c.Committer.Email != r.cfg.Email {
			continue // only commits fluxd made carry its trailers
		}
		for _, l := range strings.Split(c.Message, "\n") {
			if strings.TrimSpace(l) == line {
				return c.Hash.String(), nil
			}
		}
	}
	return "", nil
}
