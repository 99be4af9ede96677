package e2e

// The promotion guide, docs/promotion.md, is run as written, as
// docs/workflow.md is (docs_test.go): every line of its ```sh blocks, in
// order, in one shell, on a stack of its own started as
// 'FLUXD_STACK_REAL_NODE=0 make up' starts it: fluxd as a process with
// the demo's flags (metrics, webhooks, the status page, a sync every
// minute), watching every namespace.

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/localstack"
)

// promotionGuideSetup are the promotion guide's lines the test does
// itself, and why.
var promotionGuideSetup = map[string]guideSubstitute{
	"FLUXD_STACK_REAL_NODE=0 make up": {why: "the test starts a stack of its own as 'make up' does without the real node"},
	". .stack/env":                    {why: "the test's shell has the variables .stack/env sets"},
	"make down":                       {why: "the test stops its stack when it ends"},
}

func TestPromotionGuide(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	steps, setup, err := guideSteps(filepath.Join(root, "docs", "promotion.md"), "", promotionGuideSetup)
	if err != nil {
		t.Fatal(err)
	}
	for line, sub := range promotionGuideSetup {
		if !setup[line] {
			t.Errorf("the guide lacks %q (%s)", line, sub.why)
		}
	}
	if len(steps) < 30 {
		t.Fatalf("the guide has %d commands in ```sh blocks; the parser or the guide is wrong", len(steps))
	}
	env := startPromotionDemo(t)
	// The guide commits to git: a reader has a git identity, the test's
	// scratch HOME has none.
	env = append(env, "GIT_AUTHOR_NAME=Alex", "GIT_AUTHOR_EMAIL=alex@example.com",
		"GIT_COMMITTER_NAME=Alex", "GIT_COMMITTER_EMAIL=alex@example.com")
	// The guide's waits bound themselves (timeout 240 at most).
	runGuideWith(t, "promotion.md", steps, newGuideShell(t, env), &guideHooks{timeout: 5 * time.Minute})
}

// startPromotionDemo starts a stack of its own and a fluxd on it as
// 'FLUXD_STACK_REAL_NODE=0 make up' does (hack/stack: the same flags),
// and returns the environment '. .stack/env' would give.
func startPromotionDemo(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	st := startGuideStack(t)
	var addrs [3]string
	for i := range addrs {
		a, err := localstack.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = a
	}
	metrics, webhook, web := addrs[0], addrs[1], addrs[2]
	secret := "guide-webhook-secret-0123456789abcdef"
	localstack.NoteSecret("the promotion guide's webhook secret", secret)
	secretFile := filepath.Join(st.Dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := st.StartFluxd(ctx, filepath.Join(binDir, "fluxd"), "demo", "--log-format=text", "--metrics-listen="+metrics,
		"--webhook-listen="+webhook, "--webhook-secret-file="+secretFile, "--web-listen="+web, "--sync-interval=1m")
	if err != nil {
		t.Fatalf("starting the guide's fluxd: %v (log: %s)", err, st.Log("fluxd"))
	}
	t.Logf("the guide's stack and fluxd up in %v (%s)", time.Since(start).Round(time.Millisecond), st.Dir)
	return []string{
		"FLUX_URL=" + f.Addr,
		"FLUX_TOKEN=" + f.Tokens["admin"],
		"FLUX_VIEWER_TOKEN=" + f.Tokens["viewer"],
		"FLUX_DEPLOYER_TOKEN=" + f.Tokens["deployer"],
		"FLUX_METRICS_URL=http://" + metrics + "/metrics",
		"FLUX_WEBHOOK_URL=http://" + webhook + "/v1/notify",
		"FLUX_WEBHOOK_SECRET=" + secret,
		"FLUX_WEB_URL=http://" + web,
		"KUBECONFIG=" + st.Kubeconfig,
		"REGISTRY=" + st.Registry,
		"GIT_URL=" + st.GitURL,
		"GIT_BRANCH=" + st.GitBranch,
		"GIT_PATH=" + st.GitPath,
		"PATH=" + binDir + ":" + stackBinDir(t) + ":" + os.Getenv("PATH"),
	}
}
