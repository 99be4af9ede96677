package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/localstack"
)

// The promotion tests run the minimal Pipeline on the stack: a
// fluxd of their own on a git path of their own, three namespaces (dev,
// staging, prod) each running the same Deployment, an HTTP check served
// by the test, and images pushed to the stack's registry. They check
// what a user checks: the image each namespace's Deployment runs, the
// commits in the remote and their authors, `fluxctl stages` and the
// history.

const promoDir = "promotion-e2e"

// promoPprof is the promotion fluxd's metrics address, whose goroutines
// a failed wait logs.
var promoPprof string

// promoStage is what `fluxctl stages -o json` says of one stage.
type promoStage struct {
	Name    string `json:"name"`
	Current *struct {
		Bundle     string     `json:"bundle"`
		Status     string     `json:"status"`
		Reason     string     `json:"reason"`
		PromotedBy string     `json:"promotedBy"`
		Passed     []string   `json:"passed"`
		SoakUntil  *time.Time `json:"soakUntil"`
	} `json:"current"`
	Waiting []struct {
		Bundle    string   `json:"bundle"`
		Status    string   `json:"status"`
		Approvers []string `json:"approvers"`
	} `json:"waiting"`
	Paused *struct {
		By     string `json:"by"`
		Reason string `json:"reason"`
	} `json:"paused"`
	Hold string `json:"hold"`
}

func promoStages(t *testing.T, env []string) map[string]promoStage {
	t.Helper()
	m, err := readStages(t, env)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readStages is `fluxctl stages -o json`, or why it did not answer (fluxd
// has not read the Pipeline yet, say).
func readStages(t *testing.T, env []string) (map[string]promoStage, error) {
	t.Helper()
	out, stderr, code := fluxctl(t, env, "stages", "-o", "json")
	var doc struct {
		Stages []promoStage `json:"stages"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		return nil, fmt.Errorf("fluxctl stages: exit %d\n%s%s", code, out, stderr)
	}
	m := map[string]promoStage{}
	for _, s := range doc.Stages {
		m[s.Name] = s
	}
	return m, nil
}

// waitStages polls `fluxctl stages` until check passes.
func waitStages(t *testing.T, env []string, what string, timeout time.Duration, check func(map[string]promoStage) error) map[string]promoStage {
	t.Helper()
	var last map[string]promoStage
	err := poll(context.Background(), timeout, func() error {
		m, err := readStages(t, env)
		if err != nil {
			return err
		}
		last = m
		return check(last)
	})
	if err != nil {
		b, _ := json.MarshalIndent(last, "", "  ")
		if promoPprof != "" {
			if resp, err := http.Get("http://" + promoPprof + "/debug/pprof/goroutine?debug=2"); err == nil {
				dump, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("fluxd's goroutines:\n%s", dump)
			}
		}
		t.Fatalf("%s: %v\nstages: %s", what, err, b)
	}
	return last
}

func stageIs(stage, status string) func(map[string]promoStage) error {
	return func(m map[string]promoStage) error {
		s := m[stage]
		if s.Current == nil || s.Current.Status != status {
			return fmt.Errorf("stage %s is %+v, want %s", stage, s.Current, status)
		}
		return nil
	}
}

// runsImage waits until the Deployment web in ns runs image, rolled out.
func runsImage(t *testing.T, ns, image string, timeout time.Duration) {
	t.Helper()
	kc := kubeClient(t)
	err := poll(context.Background(), timeout, func() error {
		d, err := kc.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := d.Spec.Template.Spec.Containers[0].Image; got != image {
			return fmt.Errorf("%s runs %s, want %s", ns, got, image)
		}
		return rolledOut(d)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func promoDeployment(ns, image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %[1]s}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: app
          image: %[2]s
`, ns, image)
}

// healthz is the stage's HTTP check: 200 while healthy, else 503.
func healthz(t *testing.T) (url string, healthy *atomic.Bool) {
	t.Helper()
	healthy = &atomic.Bool{}
	healthy.Store(true)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Close() })
	return "http://" + lis.Addr().String() + "/healthz", healthy
}

// promoSetup pushes the images, the three stages' Deployments and the
// Pipeline, and starts a fluxd on them. It returns the image prefix and
// a deployer's fluxctl environment.
func promoSetup(t *testing.T, prefix, pipeline string, extra ...string) (img string, env []string) {
	t.Helper()
	img, pf := promoSetupFluxd(t, prefix, pipeline, extra...)
	return img, pf.env()
}

// promoFluxd is the promotion fluxd a test started, with what restarts
// it on the same state (its name, git path, tokens and flags).
type promoFluxd struct {
	*localstack.Fluxd
	name, dir string
	args      []string
	// metrics is its --metrics-listen address.
	metrics string
}

// env is a deployer's fluxctl environment for it.
func (p *promoFluxd) env() []string {
	return []string{"FLUX_URL=" + p.Addr, "FLUX_TOKEN=" + p.Tokens["deployer"], "USER=alice"}
}

// restart starts the fluxd again on the same state dir, store and tokens
// (after a SIGKILL, say).
func (p *promoFluxd) restart(t *testing.T) {
	t.Helper()
	p.Fluxd = startFaultFluxd(t, p.name, p.dir, p.Tokens, p.args...)
}

// promoSetupFluxd is promoSetup, returning the fluxd.
func promoSetupFluxd(t *testing.T, prefix, pipeline string, extra ...string) (img string, pf *promoFluxd) {
	t.Helper()
	ctx := testContext(t)
	repo := prefix + "web"
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0"} {
		if err := stack.PushImage(ctx, repo, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	img = stack.Registry + "/" + repo + ":"
	files := map[string]string{promoDir + "/" + prefix + "/pipeline.yaml": pipeline}
	for _, st := range []string{"dev", "staging", "prod"} {
		ns := prefix + st
		m := promoDeployment(ns, img+"1.0.0")
		files[promoDir+"/"+prefix+"/"+st+".yaml"] = m
		kubectlApply(t, m)
		t.Cleanup(func() {
			_ = kubeClient(t).CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
		})
	}
	pushManifest(t, "Add the "+prefix+" pipeline", files)
	for _, st := range []string{"dev", "staging", "prod"} {
		runsImage(t, prefix+st, img+"1.0.0", 2*time.Minute)
	}
	// A test may choose the metrics address (for a Prometheus to
	// scrape before fluxd starts).
	args := []string{"--git-poll-interval=2s", "--pprof"}
	maddr := ""
	for _, a := range extra {
		if v, ok := strings.CutPrefix(a, "--metrics-listen="); ok {
			maddr = v
		}
	}
	if maddr == "" {
		var err error
		if maddr, err = localstack.FreeAddr(); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--metrics-listen="+maddr)
	}
	promoPprof = maddr
	pf = &promoFluxd{name: "fluxd-" + strings.TrimSuffix(prefix, "-"), dir: promoDir + "/" + prefix,
		args: append(args, extra...), metrics: maddr}
	pf.Fluxd = startFaultFluxd(t, pf.name, pf.dir, nil, pf.args...)
	return img, pf
}

func promoPipeline(prefix, checkURL string) string {
	return fmt.Sprintf(`apiVersion: fluxd.io/v1
kind: Pipeline
metadata: {name: web, namespace: %[1]sdev}
spec:
  stages:
  - name: dev
    services: [%[1]sdev:deployment/web]
  - name: staging
    from: dev
    services: [%[1]sstaging:deployment/web]
    auto: true
    soak: 3s
    rollbackOnFailure: true
    checks:
    - http: {url: %[2]q, retries: 1, interval: 1s}
  - name: prod
    from: staging
    services: [%[1]sprod:deployment/web]
    approvals: 1
`, prefix, checkURL)
}

// TestPromotionDevToStagingToProd runs the pipeline: a release
// to dev is verified and promoted to staging by itself, checked and
// soaked there; prod waits for an approval and is promoted after
// `fluxctl approve`; a failing check in staging fails the next bundle
// and puts staging back on the last verified one; a promotion by hand
// of an older bundle pauses automatic promotion until resumed.
func TestPromotionDevToStagingToProd(t *testing.T) {
	sharedFluxd(t) // the stack
	const prefix = "pr1-"
	url, healthy := healthz(t)
	img, env := promoSetup(t, prefix, promoPipeline(prefix, url))

	// What runs at start is each stage's first bundle, verified there.
	m := waitStages(t, env, "the running images become verified bundles", 2*time.Minute, func(m map[string]promoStage) error {
		for _, st := range []string{"dev", "staging", "prod"} {
			if err := stageIs(st, "verified")(m); err != nil {
				return err
			}
		}
		return nil
	})
	b0 := m["dev"].Current.Bundle
	if m["staging"].Current.Bundle != b0 || m["prod"].Current.Bundle != b0 {
		t.Fatalf("the stages run one image but name different bundles: %+v", m)
	}
	head := remoteHead(t)

	// A release to dev: verified there (no gates), promoted to staging
	// by fluxd, checked, soaked, verified; prod waits for an approval.
	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.1.0")
	runsImage(t, prefix+"dev", img+"1.1.0", 2*time.Minute)
	runsImage(t, prefix+"staging", img+"1.1.0", 3*time.Minute)
	m = waitStages(t, env, "prod awaits an approval of staging's verified bundle", 2*time.Minute, func(m map[string]promoStage) error {
		if err := stageIs("staging", "verified")(m); err != nil {
			return err
		}
		if len(m["prod"].Waiting) != 1 || m["prod"].Waiting[0].Status != "awaiting approval" {
			return fmt.Errorf("prod waits for %+v", m["prod"].Waiting)
		}
		return nil
	})
	b1 := m["staging"].Current.Bundle
	if b1 == b0 || m["staging"].Current.PromotedBy != "fluxd" || m["prod"].Waiting[0].Bundle != b1 {
		t.Fatalf("staging %+v, prod waits for %+v; want %s promoted by fluxd and awaited by prod", m["staging"].Current, m["prod"].Waiting, b1)
	}
	if got := deploymentImage(t, prefix+"prod"); got != img+"1.0.0" {
		t.Fatalf("prod runs %s before its approval", got)
	}

	out, stderr, code := fluxctl(t, env, "approve", "--stage", "prod")
	if code != 0 {
		t.Fatalf("fluxctl approve: exit %d\n%s%s", code, out, stderr)
	}
	runsImage(t, prefix+"prod", img+"1.1.0", 3*time.Minute)
	waitStages(t, env, "prod verifies the approved bundle", time.Minute, stageIs("prod", "verified"))

	// Each promotion is one commit by fluxd through the checked path.
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	log := gitCLI(t, clone, "log", "--format=%an|%s", head+"..HEAD", "--", promoDir+"/"+prefix)
	for _, want := range []string{"to staging", "to prod"} {
		if !strings.Contains(log, "Promote bundle "+b1+" "+want) {
			t.Errorf("no commit promoting %s %s in:\n%s", b1, want, log)
		}
	}
	if strings.Count(log, "Promote bundle") != 2 {
		t.Errorf("want two promotion commits, got:\n%s", log)
	}
	if types := historyTypes(t, env, prefix+"prod:deployment/web"); !containsAll(types, "awaiting-approval", "approved", "promoted", "verified") {
		t.Errorf("prod's history types %v lack the promotion's", types)
	}

	// A failing check in staging: the next bundle fails there, staging
	// goes back to b1 by itself, and prod never sees the failed bundle.
	healthy.Store(false)
	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.2.0")
	runsImage(t, prefix+"dev", img+"1.2.0", 2*time.Minute)
	// First the new bundle fails in staging (staging is on b1 before it
	// is promoted too: waiting for that alone would pass at once).
	failed := ""
	err := poll(context.Background(), 4*time.Minute, func() error {
		for id, st := range promoBundles(t, env) {
			if id != b1 && id != b0 && st["staging"] == "failed" {
				failed = id
				return nil
			}
		}
		return fmt.Errorf("no bundle failed in staging yet")
	})
	if err != nil {
		t.Fatalf("%v: %v", err, promoBundles(t, env))
	}
	waitStages(t, env, "staging rolls back to its last verified bundle", 4*time.Minute, func(m map[string]promoStage) error {
		if s := m["staging"].Current; s == nil || s.Bundle != b1 || s.Status != "verified" {
			return fmt.Errorf("staging is on %+v, want back on %s, verified", s, b1)
		}
		return nil
	})
	runsImage(t, prefix+"staging", img+"1.1.0", 2*time.Minute)
	if bundles := promoBundles(t, env); bundles[failed]["prod"] != "" {
		t.Fatalf("bundles %v: the failed bundle %s reached prod", bundles, failed)
	}
	healthy.Store(true)

	// A promotion by hand of the older b0 into prod pauses automatic
	// promotion there; resume ends it.
	out, stderr, code = fluxctl(t, env, "promote", "--to", "prod", b0, "-y")
	if code != 0 {
		t.Fatalf("fluxctl promote: exit %d\n%s%s", code, out, stderr)
	}
	runsImage(t, prefix+"prod", img+"1.0.0", 3*time.Minute)
	m = waitStages(t, env, "prod is paused by the promotion by hand", time.Minute, func(m map[string]promoStage) error {
		if m["prod"].Paused == nil {
			return fmt.Errorf("prod is not paused: %+v", m["prod"])
		}
		return nil
	})
	if !strings.Contains(m["prod"].Paused.Reason, b0) {
		t.Errorf("prod's pause says %q", m["prod"].Paused.Reason)
	}
	if out, stderr, code := fluxctl(t, env, "stages", "resume", "prod"); code != 0 {
		t.Fatalf("fluxctl stages resume: exit %d\n%s%s", code, out, stderr)
	}
	if m := promoStages(t, env); m["prod"].Paused != nil {
		t.Errorf("prod still paused after resume: %+v", m["prod"].Paused)
	}
}

func deploymentImage(t *testing.T, ns string) string {
	t.Helper()
	d, err := kubeClient(t).AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template.Spec.Containers[0].Image
}

// promoBundles is `fluxctl bundles -o json`: each bundle's state per stage.
func promoBundles(t *testing.T, env []string) map[string]map[string]string {
	t.Helper()
	out, stderr, code := fluxctl(t, env, "bundles", "-o", "json")
	var doc struct {
		Bundles []struct {
			ID     string `json:"id"`
			Stages []struct {
				Stage  string `json:"stage"`
				Status string `json:"status"`
			} `json:"stages"`
		} `json:"bundles"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("fluxctl bundles: exit %d\n%s%s", code, out, stderr)
	}
	m := map[string]map[string]string{}
	for _, b := range doc.Bundles {
		m[b.ID] = map[string]string{}
		for _, s := range b.Stages {
			m[b.ID][s.Stage] = s.Status
		}
	}
	return m
}

func containsAll(have []string, want ...string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}
