package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/localstack"
)

// The scoped sync test's repository: team a's Deployment in namespace
// sx-a under scopesync/a, team b's ConfigMaps in sx-b under scopesync/b
// (one of which the API server refuses: a data key that is not a valid
// key), and the two Namespaces (cluster-scoped) under scopesync/ns.
const (
	scopeSyncDir = "scopesync"
	scopeSyncA   = "sx-a"
	scopeSyncB   = "sx-b"
)

func scopeSyncFiles(greeting string) map[string]string {
	ns := func(name string) string { return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + "}\n" }
	return map[string]string{
		scopeSyncDir + "/ns/namespaces.yaml": ns(scopeSyncA) + "---\n" + ns(scopeSyncB),
		scopeSyncDir + "/a/web.yaml": strings.Replace(scopeManifest(scopeSyncA), "namespace: "+scopeSyncA+"}",
			"namespace: "+scopeSyncA+", annotations: {greeting: "+greeting+"}}", 1),
		scopeSyncDir + "/b/config.yaml": fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: topsecret-b1, namespace: %[1]s}
data: {greeting: %[2]q}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: topsecret-b2, namespace: %[1]s}
data: {"not a valid key!": %[2]q}
`, scopeSyncB, greeting),
	}
}

// TestScopedViewerReadsOnlyItsObjectsInSyncEvents runs a syncing fluxd
// on the real stack over one commit holding team a's Deployment and team
// b's ConfigMaps, one of them refused by the API server. Team a's
// scoped viewer reads the sync in 'fluxctl history' (and through the
// status page's History) as the creation of its Deployment alone:
// nothing of team b's (not its namespace, its ConfigMaps' names, their
// file or the API server's refusal), nor the cluster-scoped Namespaces;
// its event stream, open while a second commit is synced, carries
// nothing of team b's either. An unscoped viewer reads all of it, and
// team b's own scoped viewer reads its ConfigMaps and its failure. Found
// by review: team a's viewer read "created ConfigMap/sb9/topsecret-b2"
// and team b's failure text.
func TestScopedViewerReadsOnlyItsObjectsInSyncEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	kc := kubeClient(t)
	t.Cleanup(func() {
		ctx := context.Background()
		for _, ns := range []string{scopeSyncA, scopeSyncB} {
			_ = kc.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		}
		_ = kc.CoreV1().ConfigMaps("default").Delete(ctx, "fluxd-sync-scope", metav1.DeleteOptions{})
	})
	pushManifest(t, "Add the scoped sync test's objects", scopeSyncFiles("hello"))

	path := filepath.Join(stack.Dir, "fluxd-scopesync-tokens")
	_ = os.Remove(path)
	toks := map[string]string{}
	for _, id := range []auth.Identity{{Instance: "team-a", Role: auth.Viewer}, {Instance: "team-b", Role: auth.Viewer}, {Instance: "ops", Role: auth.Viewer}} {
		tok, err := auth.Create(path, id)
		if err != nil {
			t.Fatal(err)
		}
		toks[id.Instance] = tok
		localstack.NoteSecret("a scoped sync test token", tok)
	}
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(fh, "scope team-a namespaces=%s paths=%s/a\nscope team-b namespaces=%s\n", scopeSyncA, scopeSyncDir, scopeSyncB)
	fh.Close()
	webAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	f := startFaultFluxd(t, "fluxd-scopesync", scopeSyncDir, toks, "--web-listen="+webAddr,
		"--sync-interval=1h", "--git-poll-interval=1s", "--sync-inventory=default/fluxd-sync-scope")
	env := func(who string) []string { return []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + toks[who]} }
	a, b, ops := env("team-a"), env("team-b"), env("ops")

	// The first sync runs at start: wait for its event.
	history := func(who []string) string {
		out, stderr, code := fluxctl(t, who, "history", "--type", "sync")
		if code != 0 {
			t.Fatalf("history: exit %d\n%s%s", code, out, stderr)
		}
		return out
	}
	err = poll(ctx, 90*time.Second, func() error {
		if out := history(ops); !strings.Contains(out, "topsecret-b2") {
			return fmt.Errorf("no sync with team b's failure yet:\n%s", out)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the first sync was not recorded: %v\nlog: %s", err, stack.Log("fluxd-scopesync"))
	}
	if _, err := kc.AppsV1().Deployments(scopeSyncA).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Fatalf("team a's Deployment was not applied: %v", err)
	}

	teamB := []string{scopeSyncB, "topsecret", "not a valid key", "Namespace/", "scopesync/b"}
	noneOfB := func(where, text string) {
		t.Helper()
		for _, l := range teamB {
			if strings.Contains(text, l) {
				t.Errorf("%s shows %q, team b's:\n%s", where, l, text)
			}
		}
	}
	out := history(a)
	noneOfB("team a's 'fluxctl history'", out)
	if !strings.Contains(out, "created Deployment/"+scopeSyncA+"/web") {
		t.Errorf("team a's history does not show its own Deployment created:\n%s", out)
	}
	out = history(ops)
	for _, want := range []string{"created ConfigMap/" + scopeSyncB + "/topsecret-b1", "ConfigMap/" + scopeSyncB + "/topsecret-b2", "created Namespace/" + scopeSyncB, "created Deployment/" + scopeSyncA + "/web"} {
		if !strings.Contains(out, want) {
			t.Errorf("the unscoped viewer's history lacks %q:\n%s", want, out)
		}
	}
	out = history(b)
	if !strings.Contains(out, "created ConfigMap/"+scopeSyncB+"/topsecret-b1") || !strings.Contains(out, "topsecret-b2") || strings.Contains(out, scopeSyncA) || strings.Contains(out, "Namespace/") {
		t.Errorf("team b's history should show its ConfigMaps and failure, and nothing of team a's or the Namespaces:\n%s", out)
	}

	base := "http://" + webAddr
	waitHTTP(t, base+"/")
	t.Run("the status page", func(t *testing.T) {
		req, _ := http.NewRequest("POST", base+"/api/fluxd.v1.FluxService/History", bytes.NewReader([]byte(`{"type":"sync"}`)))
		req.Header.Set("Authorization", "Bearer "+toks["team-a"])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "Deployment/"+scopeSyncA+"/web") {
			t.Errorf("team a's History through the page: %d %s", resp.StatusCode, body)
		}
		noneOfB("team a's History through the page", string(body))

		// The event stream, open while a second commit of both teams'
		// objects is synced.
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ereq, _ := http.NewRequestWithContext(sctx, "GET", base+"/api/events", nil)
		ereq.Header.Set("Authorization", "Bearer "+toks["team-a"])
		eresp, err := http.DefaultClient.Do(ereq)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var stream bytes.Buffer
		done := make(chan struct{})
		go func() {
			defer close(done)
			buf := make([]byte, 4096)
			for {
				n, err := eresp.Body.Read(buf)
				mu.Lock()
				stream.Write(buf[:n])
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
		rev := pushManifest(t, "Change both teams' objects", scopeSyncFiles("bonjour"))
		err = poll(ctx, 90*time.Second, func() error {
			if out := history(ops); !strings.Contains(out, rev[:12]) {
				return fmt.Errorf("no sync of %s yet", rev[:12])
			}
			return nil
		})
		if err != nil {
			t.Fatalf("the second commit was not synced: %v\nlog: %s", err, stack.Log("fluxd-scopesync"))
		}
		time.Sleep(2 * time.Second) // what the stream would carry of it
		cancel()
		eresp.Body.Close()
		<-done
		mu.Lock()
		text := stream.String()
		mu.Unlock()
		if !strings.Contains(text, "event: hello") {
			t.Errorf("team a's event stream did not open: %q", text)
		}
		noneOfB("team a's event stream", text)
		out := history(a)
		noneOfB("team a's history after the second commit", out)
		if !strings.Contains(out, rev[:12]) {
			t.Errorf("team a's history lacks the second sync, which changed its Deployment:\n%s", out)
		}
	})
}
