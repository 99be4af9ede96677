// Package githttp serves bare git repositories over smart HTTP with git's
// own http-backend, for tests: a real protocol peer for fluxd's HTTPS
// path, reached as http://…, optionally behind basic auth, and with the
// faults tests draw (a remote that stalls, refuses a push, loses a push's
// reply, or sees someone else push first). It is the one place tests
// serve git over HTTP; fluxd itself never imports it.
package githttp

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BackendPath is where Debian's git installs its http-backend.
const BackendPath = "/usr/lib/git-core/git-http-backend"

// Options say who may use the remote.
type Options struct {
	// User is the name http-backend sees as REMOTE_USER (default "fluxd").
	User string
	// Password, when set, is required with User over basic auth; a request
	// without them gets 401 and a challenge.
	Password string
}

// Remote is a running smart HTTP server over the bare repositories of one
// directory. Its fault switches may be flipped at any time, from any
// goroutine. A repository pushes only if its config says
// http.receivepack=true.
type Remote struct {
	// URL is the server's base URL: a repository is URL/<its directory name>.
	URL string
	// Stalled makes every request hang, as a remote behind a dead load
	// balancer does, until it is cleared (the request then goes through)
	// or the client gives up.
	Stalled atomic.Bool
	// Refuse makes the next push fail with 503, nothing pushed.
	Refuse atomic.Bool
	// LoseReply makes the next push land while its client gets 502.
	LoseReply atomic.Bool
	// Interpose, when set, runs once just before the next push reaches
	// the repository (someone else pushing at that very moment).
	Interpose atomic.Pointer[func()]

	opts    Options
	backend http.Handler
}

// Serve serves the bare repositories under root until the test ends.
func Serve(t testing.TB, root string, opts Options) *Remote {
	t.Helper()
	if opts.User == "" {
		opts.User = "fluxd"
	}
	r := &Remote{opts: opts, backend: Backend(root, opts.User)}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Backend is git's http-backend over the bare repositories under root,
// every one exported, with user as the authenticated user.
func Backend(root, user string) http.Handler {
	return &cgi.Handler{Path: BackendPath, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + user}}
}

// RepoURL is the URL of the bare repository at path (under root).
func (r *Remote) RepoURL(bare string) string {
	return r.URL + "/" + filepath.Base(bare)
}

// ServeHTTP checks the credentials, applies the faults that are switched
// on, and hands the request to http-backend.
func (r *Remote) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.opts.Password != "" {
		u, p, ok := req.BasicAuth()
		if !ok || u != r.opts.User || p != r.opts.Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	for r.Stalled.Load() {
		select {
		case <-req.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-receive-pack") {
		if f := r.Interpose.Swap(nil); f != nil {
			(*f)()
		}
		if r.Refuse.Swap(false) {
			http.Error(w, "the remote refuses this push (test fault)", http.StatusServiceUnavailable)
			return
		}
		if r.LoseReply.Swap(false) {
			r.backend.ServeHTTP(httptest.NewRecorder(), req)
			http.Error(w, "connection lost after the push (test fault)", http.StatusBadGateway)
			return
		}
	}
	r.backend.ServeHTTP(w, req)
}

// Reset switches every fault off.
func (r *Remote) Reset() {
	r.Stalled.Store(false)
	r.Refuse.Store(false)
	r.LoseReply.Store(false)
	r.Interpose.Store(nil)
}
