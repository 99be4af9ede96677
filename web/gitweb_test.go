package web

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// --git-web-url is refused, with what to give instead, unless it is a
// plain http(s) prefix without credentials.
func TestValidateGitWebURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, wantErr string
	}{
		{"", ""},
		{"https://github.com/org/repo/commit", ""},
		{"http://forge.internal:3000/org/repo/commit/", ""},
		{"github.com/org/repo/commit", "not an http(s) URL"},
		{"ssh://git@github.com/org/repo", "not an http(s) URL"},
		{"https://user:secret@forge.example/org/repo/commit", "carries credentials"},
		{"https://forge.example/commit?id=", "query or fragment"},
	} {
		err := ValidateGitWebURL(tc.in)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.wantErr)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("%q: the error repeats the password: %v", tc.in, err)
		}
	}
}

// The page learns the forge's commit prefix (without a trailing slash)
// and whether fluxd syncs from its session; a bad prefix stops New.
func TestSessionCarriesGitWebURLAndSync(t *testing.T) {
	t.Parallel()
	conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := New(context.Background(), Config{Auth: testTokens, Conn: conn, Hub: NewHub(4), GitWebURL: "forge/commit"}); err == nil {
		t.Fatal("New took --git-web-url forge/commit")
	}
	h, err := New(context.Background(), Config{Auth: testTokens, Conn: conn, Hub: NewHub(4), GitWebURL: "https://forge.example/org/repo/commit/", Syncs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest("GET", srv.URL+"/api/session", nil)
	req.Header.Set("Authorization", "Bearer fxd_deployer")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var si sessionInfo
	if err := json.NewDecoder(resp.Body).Decode(&si); err != nil {
		t.Fatal(err)
	}
	if si.GitWebURL != "https://forge.example/org/repo/commit" || !si.Syncs || !si.CanAct {
		t.Errorf("session info %+v", si)
	}
}
