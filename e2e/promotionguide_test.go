package e2e

// The promotion guide, docs/promotion.md, is run as written, as
// docs/workflow.md is (docs_test.go): every line of its ```sh blocks, in
// order, in one shell, on a stack of its own started as
// 'FLUXD_STACK_REAL_NODE=0 make up' starts it: fluxd as a process with
// the demo's flags (metrics, webhooks, the status page, a sync every
// minute), watching every namespace.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	webhookBlock, err := approveWebhookBlock(filepath.Join(root, "docs", "promotion.md"))
	if err != nil {
		t.Fatal(err)
	}
	env, webhook, approveSecret := startPromotionDemo(t)
	// The guide commits to git: a reader has a git identity, the test's
	// scratch HOME has none.
	env = append(env, "GIT_AUTHOR_NAME=Alex", "GIT_AUTHOR_EMAIL=alex@example.com",
		"GIT_COMMITTER_NAME=Alex", "GIT_COMMITTER_EMAIL=alex@example.com")
	sh := newGuideShell(t, env)
	// The guide's waits bound themselves (timeout 240 at most).
	hooks := &guideHooks{timeout: 5 * time.Minute}
	runGuideWith(t, "promotion.md", steps, sh, hooks)

	// The approval webhook's example, which the demo cannot run (its
	// fluxd has no approval secret; this one has): a new build reaches
	// prod's approval, and the example, pointed at this fluxd, with its
	// secret and the waiting bundle, approves it as webhook:ci.
	var webhookSteps []guideStep
	for _, c := range []string{
		"crane copy $REGISTRY/helloworld:1.2.0 $REGISTRY/helloworld:1.3.0",
		"fluxctl release --service team-dev:deployment/web --update-image $REGISTRY/helloworld:1.3.0 -y",
		`timeout 180 sh -c 'until fluxctl stages | grep -q "prod: bundle .* awaiting approval"; do sleep 2; done'`,
		`bundle=$(fluxctl stages -o json | jq -r '.stages[] | select(.name == "prod") | .waiting[0].bundle')`,
	} {
		webhookSteps = append(webhookSteps, guideStep{command: c})
	}
	if err := os.WriteFile(filepath.Join(sh.work, "approve-secret"), []byte(approveSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range webhookBlock {
		s.command = strings.ReplaceAll(s.command, "https://fluxd.example:3031", "http://"+webhook)
		s.command = strings.ReplaceAll(s.command, `"bundle":"3f9a0c1d2e4b"`, `"bundle":"'"$bundle"'"`)
		webhookSteps = append(webhookSteps, s)
	}
	webhookSteps = append(webhookSteps,
		guideStep{command: `timeout 180 sh -c 'until kubectl get deployment -n team-prod web -o wide | grep -q helloworld:1.3.0; do sleep 2; done'`},
		guideStep{command: "fluxctl history team-prod:deployment/web", expect: "webhook:ci"})
	runGuideWith(t, "promotion.md (the approval webhook's example)", webhookSteps, sh, hooks)
}

// approveWebhookBlock is the guide's ```bash block that posts to
// /v1/approve, as steps.
func approveWebhookBlock(guide string) ([]guideStep, error) {
	b, err := os.ReadFile(guide)
	if err != nil {
		return nil, err
	}
	for _, block := range strings.Split(string(b), "```bash\n")[1:] {
		body, _, ok := strings.Cut(block, "```")
		if !ok || !strings.Contains(body, "/v1/approve") {
			continue
		}
		path := filepath.Join(os.TempDir(), fmt.Sprintf("promotion-webhook-%d.md", os.Getpid()))
		if err := os.WriteFile(path, []byte("```sh\n"+body+"```\n"), 0o600); err != nil {
			return nil, err
		}
		defer os.Remove(path)
		steps, _, err := guideSteps(path, "", nil)
		return steps, err
	}
	return nil, fmt.Errorf("%s has no ```bash block posting to /v1/approve", guide)
}

// startPromotionDemo starts a stack of its own and a fluxd on it as
// 'FLUXD_STACK_REAL_NODE=0 make up' does (hack/stack: the same flags),
// and returns the environment '. .stack/env' would give. Unlike the
// demo, its fluxd has an approval webhook secret (returned, with the
// webhook listener's address), for the webhook's example.
func startPromotionDemo(t *testing.T) (env []string, webhook, approveSecret string) {
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
	metrics, web := addrs[0], addrs[2]
	webhook = addrs[1]
	secret := "guide-webhook-secret-0123456789abcdef"
	localstack.NoteSecret("the promotion guide's webhook secret", secret)
	secretFile := filepath.Join(st.Dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	approveSecret = "guide-approve-secret-fedcba9876543210"
	localstack.NoteSecret("the promotion guide's approval secret", approveSecret)
	approveFile := filepath.Join(st.Dir, "approve-secret")
	if err := os.WriteFile(approveFile, []byte(approveSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := st.StartFluxd(ctx, filepath.Join(binDir, "fluxd"), "demo", "--log-format=text", "--metrics-listen="+metrics,
		"--webhook-listen="+webhook, "--webhook-secret-file="+secretFile, "--web-listen="+web, "--sync-interval=1m",
		"--approve-webhook-secret-file="+approveFile)
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
	}, webhook, approveSecret
}
