package web

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fluxd/fluxd/history/sqlite"
)

// TestSessionsInTheStoreWorkOnEveryReplica: a sign-in on one replica's
// page is a session on another's, and on a replica started afterwards
// (a restart), since both read one store (a real SQLite file); the
// database holds neither the cookie's key nor the token; signing out on
// one ends it on all.
func TestSessionsInTheStoreWorkOnEveryReplica(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	replica := func() *httptest.Server {
		s, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		h, err := New(context.Background(), Config{Auth: testTokens, Conn: conn, Hub: NewHub(4), Sessions: s})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := replica(), replica()
	code, cookie := signIn(t, a, "fxd_deployer", "application/json", "")
	if code != http.StatusOK || cookie == "" {
		t.Fatalf("sign-in on a: %d", code)
	}
	whoAmI := func(srv *httptest.Server) (int, map[string]any) {
		req, _ := http.NewRequest("GET", srv.URL+"/api/session", nil)
		req.Header.Set("Cookie", sessionCookie+"="+cookie)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, m
	}
	_, onA := whoAmI(a)
	for name, srv := range map[string]*httptest.Server{"b": b, "a restarted": replica()} {
		code, m := whoAmI(srv)
		if code != http.StatusOK || m["instance"] != "a" || m["role"] != "deployer" || m["csrf"] != onA["csrf"] || m["csrf"] == "" {
			t.Errorf("the session on %s: %d %v (on a: %v)", name, code, m, onA)
		}
	}
	// The database holds neither secret.
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var id, tokenHash string
	var sealedBytes []byte
	if err := db.QueryRow(`SELECT id, token_hash, sealed FROM web_sessions`).Scan(&id, &tokenHash, &sealedBytes); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"fxd_deployer", cookie, onA["csrf"].(string)} {
		if bytes.Contains([]byte(id+tokenHash), []byte(secret)) || bytes.Contains(sealedBytes, []byte(secret)) {
			t.Errorf("the stored session holds %q in the clear", secret)
		}
	}
	// Sign out on b: the session ends on a too.
	req, _ := http.NewRequest("DELETE", b.URL+"/api/session", nil)
	req.Header.Set("Cookie", sessionCookie+"="+cookie)
	req.Header.Set("X-CSRF-Token", onA["csrf"].(string))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("sign-out on b: %d", resp.StatusCode)
	}
	if code, _ := whoAmI(a); code != http.StatusUnauthorized {
		t.Errorf("after signing out on b, a answers %d", code)
	}
}
