package gogit

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/githttp"
)

func TestSmartHTTPWithCredentials(t *testing.T) {
	_, bare := newRemote(t)
	// http-backend refuses pushes unless receive-pack is enabled.
	gitCLI(t, bare, "config", "http.receivepack", "true")
	srv := githttp.Serve(t, filepath.Dir(bare), githttp.Options{User: "fluxd", Password: "s3cret-token"})
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
