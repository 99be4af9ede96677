package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/localstack"
)

// The health listener answers from fluxd's first moment: while fluxd
// waits for an API server that accepts connections and never answers,
// /healthz is 200 and /readyz is 503 naming what fluxd waits for.
func TestHealthAnswersWhileStarting(t *testing.T) {
	blackhole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer blackhole.Close()
	go func() {
		for {
			c, err := blackhole.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://`+blackhole.Addr().String()+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "tokens")
	if _, err := auth.Create(tokens, auth.Identity{Instance: "t", Role: auth.Admin}); err != nil {
		t.Fatal(err)
	}
	healthAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	apiAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := newRootCommand()
	cmd.SetArgs([]string{"--listen=" + apiAddr, "--tokens-file=" + tokens, "--kubeconfig=" + kubeconfig, "--state-dir=" + filepath.Join(dir, "state"),
		"--git-url=file://" + filepath.Join(dir, "none.git"), "--git-user=f", "--git-email=f@f", "--health-listen=" + healthAddr})
	cmd.SetErr(io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	var status int
	var body string
	for range 200 {
		resp, err := http.Get("http://" + healthAddr + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			status, body = resp.StatusCode, string(b)
			if strings.Contains(body, "reaching the Kubernetes API server") {
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "not ready: starting: reaching the Kubernetes API server http://"+blackhole.Addr().String()) {
		t.Fatalf("/readyz while the API server does not answer: %d %q; want 503 naming what fluxd waits for", status, body)
	}
	resp, err := http.Get("http://" + healthAddr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz while starting: %d, want 200", resp.StatusCode)
	}
}
