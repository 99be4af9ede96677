package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/localstack"
)

// scopeDir holds the scope test's manifests: a service "web" of team a
// (namespace scope-a, under scopetest/a) and one of team b (scope-b,
// scopetest/b).
const scopeDir = "scopetest"

func scopeManifest(ns string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %s}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: app, image: %s/helloworld:1.0.0}]
`, ns, stack.Registry)
}

// scopeTokens writes name's tokens file: deployers of team-a (scoped to
// scope-a and scopetest/a) and team-b (scope-b), and a viewer of ops,
// unscoped.
func scopeTokens(t *testing.T, name string) map[string]string {
	t.Helper()
	path := filepath.Join(stack.Dir, name+"-tokens")
	_ = os.Remove(path)
	toks := map[string]string{}
	for _, id := range []auth.Identity{{Instance: "team-a", Role: auth.Admin}, {Instance: "team-a", Role: auth.Deployer}, {Instance: "team-b", Role: auth.Deployer}, {Instance: "ops", Role: auth.Viewer}} {
		tok, err := auth.Create(path, id)
		if err != nil {
			t.Fatal(err)
		}
		toks[id.Instance+"-"+id.Role.String()] = tok
		localstack.NoteSecret("a scope test token", tok)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, "scope team-a namespaces=scope-a paths=%s/a\nscope team-b namespaces=scope-b\n", scopeDir)
	f.Close()
	return toks
}

func listedIDs(t *testing.T, env []string) string {
	t.Helper()
	out, stderr, code := fluxctl(t, env, "list-services", "-o", "json")
	if code != 0 {
		t.Fatalf("list-services: exit %d: %s", code, stderr)
	}
	var svcs []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &svcs); err != nil {
		t.Fatalf("list-services -o json: %v\n%s", err, out)
	}
	var ids []string
	for _, s := range svcs {
		ids = append(ids, s.ID)
	}
	sort.Strings(ids)
	return strings.Join(ids, " ")
}

// TestTwoScopedInstances runs one fluxd for two teams, each instance
// scoped to its namespace, on the real stack: each team lists only its
// service, names it by its short name although the other team has one of
// the same name, may lock it (a commit in the remote) but not the other
// team's ("no service", and the remote does not change), plans a release
// of all over its own service only, cannot run the sync, and sees the
// same through the status page's JSON API; an unscoped instance sees
// both, and fluxd warns once that it is unscoped.
func TestTwoScopedInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	pushManifest(t, "Add the scope test's services", map[string]string{
		scopeDir + "/a/web.yaml": scopeManifest("scope-a"),
		scopeDir + "/b/web.yaml": scopeManifest("scope-b"),
	})
	toks := scopeTokens(t, "fluxd-scope")
	webAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	f := startFaultFluxd(t, "fluxd-scope", scopeDir, toks, "--web-listen="+webAddr)
	env := func(who string) []string { return []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + toks[who]} }
	a, b, ops := env("team-a-deployer"), env("team-b-deployer"), env("ops-viewer")

	if got := listedIDs(t, a); got != "scope-a:deployment/web" {
		t.Errorf("team a lists %q, want only its service", got)
	}
	if got := listedIDs(t, b); got != "scope-b:deployment/web" {
		t.Errorf("team b lists %q, want only its service", got)
	}
	if got := listedIDs(t, ops); !strings.Contains(got, "scope-a:deployment/web scope-b:deployment/web") {
		t.Errorf("the unscoped instance lists %q, want both teams' services", got)
	}

	t.Run("a call about the other team's service is not found", func(t *testing.T) {
		head := remoteHead(t)
		for _, args := range [][]string{
			{"lock", "scope-b/web", "-m", "mine now"},
			{"automate", "scope-b:deployment/web"},
			{"list-images", "scope-b/web"},
			{"history", "scope-b/web"},
			{"release", "--service", "scope-b/web", "--update-all-images", "--dry-run"},
		} {
			out, stderr, code := fluxctl(t, a, args...)
			if code == 0 || !strings.Contains(stderr, "there is no service") {
				t.Errorf("team a: fluxctl %s: exit %d, want 'there is no service'\n%s%s", strings.Join(args, " "), code, out, stderr)
			}
		}
		if got := remoteHead(t); got != head {
			t.Errorf("the remote moved from %s to %s", head, got)
		}
	})

	t.Run("its own service, by its short name", func(t *testing.T) {
		head := remoteHead(t)
		// "web" is ambiguous to the unscoped instance, not to team a.
		if out, stderr, code := fluxctl(t, a, "lock", "web", "-m", "team a's freeze"); code != 0 {
			t.Fatalf("team a: lock web: exit %d\n%s%s", code, out, stderr)
		}
		if remoteHead(t) == head {
			t.Error("team a's lock made no commit")
		}
		out, stderr, code := fluxctl(t, a, "list-services", "-o", "json")
		if code != 0 || !strings.Contains(out, "team a's freeze") {
			t.Errorf("team a's service is not locked:\n%s%s", out, stderr)
		}
		if out, stderr, code := fluxctl(t, a, "unlock", "web"); code != 0 {
			t.Errorf("team a: unlock web: exit %d\n%s%s", code, out, stderr)
		}
		out, _, _ = fluxctl(t, a, "history")
		if strings.Contains(out, "scope-b") {
			t.Errorf("team a's history mentions team b's service:\n%s", out)
		}
	})

	t.Run("release --all plans its own services only", func(t *testing.T) {
		out, stderr, code := fluxctl(t, a, "release", "--all", "--update-all-images", "--dry-run")
		if code != 0 || !strings.Contains(out, "scope-a") || strings.Contains(out, "scope-b") {
			t.Errorf("team a's plan of all: exit %d\n%s%s", code, out, stderr)
		}
	})

	t.Run("the sync is refused", func(t *testing.T) {
		out, stderr, code := fluxctl(t, a, "sync")
		if code == 0 || !strings.Contains(stderr, "may not run one") {
			t.Errorf("team a: sync: exit %d\n%s%s", code, out, stderr)
		}
	})

	t.Run("the status page's JSON API", func(t *testing.T) {
		base := "http://" + webAddr
		waitHTTP(t, base+"/")
		call := func(tok, method, body string) (int, string) {
			req, _ := http.NewRequest("POST", base+"/api/fluxd.v1.FluxService/"+method, bytes.NewReader([]byte(body)))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		// Each page method, called by team a's admin about team b's
		// service or for everything.
		for _, tc := range []struct {
			method, body string
			code         int
		}{
			{"ListServices", `{}`, 200},
			{"ListImages", `{"service":"scope-b/web"}`, 404},
			{"History", `{"service":"scope-b/web"}`, 404},
			{"History", `{}`, 200},
			{"Lock", `{"service":"scope-b/web","message":"x"}`, 404},
			{"Unlock", `{"service":"scope-b/web"}`, 404},
			{"Release", `{"kind":"RELEASE_KIND_PLAN","spec":{"all":true,"allLatest":true}}`, 200},
			{"Release", `{"kind":"RELEASE_KIND_PLAN","spec":{"services":["scope-b/web"],"allLatest":true}}`, 404},
			{"ListJobs", `{}`, 200},
			{"GetJob", `{"id":"no-such-job"}`, 404},
			{"CancelJob", `{"id":"no-such-job"}`, 404},
		} {
			code, body := call(toks["team-a-admin"], tc.method, tc.body)
			if code != tc.code {
				t.Errorf("%s %s: %d %s, want %d", tc.method, tc.body, code, body, tc.code)
			}
			if strings.Contains(strings.ReplaceAll(body, "scope-b/web", ""), "scope-b") {
				t.Errorf("%s %s: the answer mentions team b's service:\n%s", tc.method, tc.body, body)
			}
		}
		if code, body := call(toks["ops-viewer"], "ListServices", `{}`); code != 200 || !strings.Contains(body, "scope-b") {
			t.Errorf("the unscoped instance through the page: %d %s", code, body)
		}
	})

	log := stackLog(t, "fluxd-scope")
	if n := strings.Count(log, "instance has no scope"); n != 1 || !strings.Contains(log, "instance=ops") {
		t.Errorf("fluxd warned %d times of an unscoped instance, want once, for ops", n)
	}
}
