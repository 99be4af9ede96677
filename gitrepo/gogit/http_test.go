package gogit

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
)

// smartHTTP serves the bare repositories under root with git's own
// http-backend (smart HTTP, push enabled), behind basic auth.
func smartHTTP(t *testing.T, root, user, password string) *httptest.Server {
	t.Helper()
	backend := &cgi.Handler{
		Path: "/usr/lib/git-core/git-http-backend",
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=" + user},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSmartHTTPWithCredentials(t *testing.T) {
	_, bare := newRemote(t)
	// http-backend refuses pushes unless receive-pack is enabled.
	gitCLI(t, bare, "config", "http.receivepack", "true")
	srv := smartHTTP(t, filepath.Dir(bare), "fluxd", "s3cret-token")
	host := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	r, err := Open(ctx, Config{URL: "http://fluxd:s3cret-token@" + host + "/remote.git", Branch: "prod", Paths: []string{"deploy"}, User: "fluxd", Email: "f@f", Dir: filepath.Join(t.TempDir(), "clone")})
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := commitAndPush(ctx, r, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:3\n")}, "Release a:3", gitrepo.Signature{Name: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != commit {
		t.Fatalf("remote prod = %s, want %s pushed over smart HTTP", got, commit)
	}

	// A wrong token: refused, explained, and the token is not shown.
	_, err = Open(ctx, Config{URL: "http://fluxd:wrong-token@" + host + "/remote.git", Branch: "prod", User: "fluxd", Email: "f@f", Dir: filepath.Join(t.TempDir(), "clone2")})
	if err == nil {
		t.Fatal("clone with a wrong token succeeded")
	}
	if strings.Contains(err.Error(), "wrong-token") || !strings.Contains(err.Error(), "refused fluxd's credentials") || !strings.Contains(err.Error(), "redacted") {
		t.Errorf("wrong-token error:\n%v", err)
	}
}
