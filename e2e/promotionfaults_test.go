package e2e

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/gates"
	"github.com/fluxd/fluxd/internal/localstack"
)

// More promotion tests on the stack, each on a pipeline of its own (its
// own prefix, namespaces and fluxd): a new build does not reset a soak,
// SIGKILL mid-soak and mid-promotion, a job check, a prometheus check
// against a real Prometheus, and CI's signed approval webhook.

// promoPipelineWith is the pipeline with staging's gates given:
// staging are the lines under staging (after services and from), each
// indented four spaces.
func promoPipelineWith(prefix, staging string) string {
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
%[2]s
  - name: prod
    from: staging
    services: [%[1]sprod:deployment/web]
    approvals: 1
`, prefix, strings.TrimRight(staging, "\n"))
}

// promoRecord is one bundle's state in one stage, as `fluxctl bundles
// -o json` says it.
type promoRecord struct {
	Stage     string     `json:"stage"`
	Status    string     `json:"status"`
	Reason    string     `json:"reason"`
	Since     *time.Time `json:"since"`
	SoakUntil *time.Time `json:"soakUntil"`
	Passed    []string   `json:"passed"`
	Current   bool       `json:"current"`
}

// promoRecords is each bundle's records by stage, and the tag each
// bundle's image has.
func promoRecords(t *testing.T, env []string) (recs map[string]map[string]promoRecord, tags map[string]string) {
	t.Helper()
	recs, tags, err := promoRecordsOrErr(t, env)
	if err != nil {
		t.Fatal(err)
	}
	return recs, tags
}

// promoRecordsOrErr is promoRecords, with fluxctl's failure returned: a
// fluxd just restarted answers "no pipeline" until it has read git's
// Pipelines, which a poll waits out.
func promoRecordsOrErr(t *testing.T, env []string) (recs map[string]map[string]promoRecord, tags map[string]string, err error) {
	t.Helper()
	out, stderr, code := fluxctl(t, env, "bundles", "-o", "json")
	var doc struct {
		Bundles []struct {
			ID     string `json:"id"`
			Images []struct {
				Tag string `json:"tag"`
			} `json:"images"`
			Stages []promoRecord `json:"stages"`
		} `json:"bundles"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		return nil, nil, fmt.Errorf("fluxctl bundles: exit %d\n%s%s", code, out, stderr)
	}
	recs, tags = map[string]map[string]promoRecord{}, map[string]string{}
	for _, b := range doc.Bundles {
		recs[b.ID] = map[string]promoRecord{}
		for _, r := range b.Stages {
			recs[b.ID][r.Stage] = r
		}
		if len(b.Images) > 0 {
			tags[b.ID] = b.Images[0].Tag
		}
	}
	return recs, tags, nil
}

// waitRecord polls until bundle's record in stage has status, and
// returns it.
func waitRecord(t *testing.T, env []string, bundle, stage, status string, timeout time.Duration) promoRecord {
	t.Helper()
	var last promoRecord
	err := poll(context.Background(), timeout, func() error {
		recs, _, err := promoRecordsOrErr(t, env)
		if err != nil {
			return err
		}
		last = recs[bundle][stage]
		if last.Status != status {
			return fmt.Errorf("bundle %s is %q in %s (%s), want %s", bundle, last.Status, stage, last.Reason, status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// allVerified waits until what runs at start is each stage's first
// bundle, verified there.
func allVerified(t *testing.T, env []string) {
	t.Helper()
	waitStages(t, env, "the running images become verified bundles", 2*time.Minute, func(m map[string]promoStage) error {
		for _, st := range []string{"dev", "staging", "prod"} {
			if err := stageIs(st, "verified")(m); err != nil {
				return err
			}
		}
		return nil
	})
}

// promotionCommits counts the remote's commits after rev that promote
// bundle to stage.
func promotionCommits(t *testing.T, rev, prefix, bundle, stage string) int {
	t.Helper()
	n := 0
	for _, s := range commitsSince(t, rev, promoDir+"/"+prefix) {
		if strings.Contains(s, "Promote bundle "+bundle+" to "+stage) {
			n++
		}
	}
	return n
}

// sigkill kills the fluxd with SIGKILL and waits until it is gone.
func sigkill(t *testing.T, pf *promoFluxd) {
	t.Helper()
	if err := pf.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := poll(context.Background(), 10*time.Second, func() error {
		if !pf.Exited() {
			return fmt.Errorf("fluxd %d still runs", pf.PID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// near reports whether a and b are within d of each other.
func near(a, b time.Time, d time.Duration) bool {
	diff := a.Sub(b)
	return diff <= d && diff >= -d
}

// TestPromotionNewBuildDoesNotResetSoak: a newer bundle promoted into
// staging while the last one soaks there does not reset that soak. Each
// soaks on its own and is verified at its own time.
func TestPromotionNewBuildDoesNotResetSoak(t *testing.T) {
	sharedFluxd(t) // the stack
	const prefix = "pr2-"
	const soak = 30 * time.Second
	img, env := promoSetup(t, prefix, promoPipelineWith(prefix, `    auto: true
    soak: 30s`))
	allVerified(t, env)

	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.1.0")
	runsImage(t, prefix+"staging", img+"1.1.0", 3*time.Minute)
	m := waitStages(t, env, "1.1.0 soaks in staging", time.Minute, stageIs("staging", "soaking"))
	b1, soak1 := m["staging"].Current.Bundle, m["staging"].Current.SoakUntil
	if soak1 == nil {
		t.Fatalf("staging's soaking bundle has no soakUntil: %+v", m["staging"].Current)
	}
	// Well into the soak, so that the two soaks end far enough apart to
	// tell which one a verification kept to.
	time.Sleep(time.Until(soak1.Add(-soak / 2)))

	// A new build mid-soak: dev verifies it and fluxd promotes it into
	// staging, over 1.1.0, which soaks on.
	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.2.0")
	runsImage(t, prefix+"staging", img+"1.2.0", 3*time.Minute)
	recs, tags := promoRecords(t, env)
	if !time.Now().Before(*soak1) {
		t.Fatalf("1.2.0 reached staging after 1.1.0's soak ended (%s): the test shows nothing; lengthen the soak", soak1)
	}
	if r := recs[b1]["staging"]; r.Status != "soaking" || r.SoakUntil == nil || !r.SoakUntil.Equal(*soak1) {
		t.Fatalf("1.1.0's bundle %s in staging is %+v after 1.2.0 arrived; want still soaking until %s", b1, r, soak1)
	}
	m = waitStages(t, env, "1.2.0 soaks in staging", time.Minute, stageIs("staging", "soaking"))
	b2, soak2 := m["staging"].Current.Bundle, m["staging"].Current.SoakUntil
	if b2 == b1 || tags[b2] != "1.2.0" || soak2 == nil || soak2.Sub(*soak1) < soak/4 {
		t.Fatalf("staging's current is %+v (tag %s); want 1.2.0's bundle soaking until after %s", m["staging"].Current, tags[b2], soak1)
	}

	// 1.1.0's is verified at the end of its own soak, not 1.2.0's.
	r1 := waitRecord(t, env, b1, "staging", "verified", soak+time.Minute)
	if r1.SoakUntil == nil || !r1.SoakUntil.Equal(*soak1) {
		t.Errorf("1.1.0's soak ended at %v, want %s (as it was before 1.2.0 arrived)", r1.SoakUntil, soak1)
	}
	if r1.Since == nil || r1.Since.Before(*soak1) || !r1.Since.Before(*soak2) {
		t.Errorf("1.1.0's bundle was verified at %v; want between its soak's end %s and 1.2.0's %s", r1.Since, soak1, soak2)
	}
	r2 := waitRecord(t, env, b2, "staging", "verified", soak+time.Minute)
	if r2.Since == nil || r2.Since.Before(*soak2) {
		t.Errorf("1.2.0's bundle was verified at %v, before its soak's end %s", r2.Since, soak2)
	}
	t.Logf("soaks: 1.1.0 until %s, verified %s; 1.2.0 until %s, verified %s", soak1.Format(time.TimeOnly), r1.Since.Format(time.TimeOnly), soak2.Format(time.TimeOnly), r2.Since.Format(time.TimeOnly))

	// prod is offered the newest verified bundle, 1.2.0's.
	waitStages(t, env, "prod awaits 1.2.0's bundle", time.Minute, func(m map[string]promoStage) error {
		for _, w := range m["prod"].Waiting {
			if w.Bundle == b2 && w.Status == "awaiting approval" {
				return nil
			}
		}
		return fmt.Errorf("prod waits for %+v, want %s", m["prod"].Waiting, b2)
	})
}

// TestPromotionSurvivesSIGKILL: fluxd killed with SIGKILL mid-soak
// resumes the soak from the store (same end, not restarted), and killed
// mid-promotion finishes the promotion with one commit.
func TestPromotionSurvivesSIGKILL(t *testing.T) {
	sharedFluxd(t) // the stack
	const prefix = "pr3-"
	img, pf := promoSetupFluxd(t, prefix, promoPipelineWith(prefix, `    auto: true
    soak: 20s`))
	env := pf.env()
	allVerified(t, env)
	head := remoteHead(t)

	// Mid-soak.
	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.1.0")
	runsImage(t, prefix+"staging", img+"1.1.0", 3*time.Minute)
	m := waitStages(t, env, "1.1.0 soaks in staging", time.Minute, stageIs("staging", "soaking"))
	b1, soak1 := m["staging"].Current.Bundle, m["staging"].Current.SoakUntil
	if soak1 == nil {
		t.Fatalf("staging's soaking bundle has no soakUntil: %+v", m["staging"].Current)
	}
	sigkill(t, pf)
	killed := time.Now()
	pf.restart(t)
	env = pf.env()
	r := waitRecord(t, env, b1, "staging", "verified", 2*time.Minute)
	if r.SoakUntil == nil || !r.SoakUntil.Equal(*soak1) {
		t.Errorf("after the restart 1.1.0's soak ends at %v, want %s (as stored before the kill)", r.SoakUntil, soak1)
	}
	if r.Since == nil || r.Since.Before(*soak1) || !near(*r.Since, *soak1, 15*time.Second) {
		t.Errorf("1.1.0's bundle was verified at %v, want soon after its soak's end %s (killed at %s)", r.Since, soak1, killed.Format(time.TimeOnly))
	}
	if n := promotionCommits(t, head, prefix, b1, "staging"); n != 1 {
		t.Errorf("%d commits promote %s to staging, want 1", n, b1)
	}

	// Mid-promotion: approved into prod, killed as soon as the
	// promotion is recorded (its job queued), before it has rolled out.
	waitStages(t, env, "prod awaits 1.1.0's bundle", time.Minute, func(m map[string]promoStage) error {
		if len(m["prod"].Waiting) != 1 || m["prod"].Waiting[0].Bundle != b1 {
			return fmt.Errorf("prod waits for %+v", m["prod"].Waiting)
		}
		return nil
	})
	if out, stderr, code := fluxctl(t, env, "approve", "--stage", "prod"); code != 0 {
		t.Fatalf("fluxctl approve: exit %d\n%s%s", code, out, stderr)
	}
	var at string
	err := poll(context.Background(), time.Minute, func() error {
		recs, _, err := promoRecordsOrErr(t, env)
		if err != nil {
			return err
		}
		at = recs[b1]["prod"].Status
		if at == "awaiting approval" || at == "" {
			return fmt.Errorf("prod's record of %s is %q", b1, at)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sigkill(t, pf)
	committed := promotionCommits(t, head, prefix, b1, "prod")
	t.Logf("killed with %s %q in prod; %d promotion commit(s) in the remote then; prod ran %s", b1, at, committed, deploymentImage(t, prefix+"prod"))
	pf.restart(t)
	env = pf.env()
	runsImage(t, prefix+"prod", img+"1.1.0", 3*time.Minute)
	waitRecord(t, env, b1, "prod", "verified", 2*time.Minute)
	if n := promotionCommits(t, head, prefix, b1, "prod"); n != 1 {
		t.Errorf("%d commits promote %s to prod, want 1", n, b1)
	}
	if n := promotionCommits(t, head, prefix, b1, "staging"); n != 1 {
		t.Errorf("%d commits promote %s to staging, want 1", n, b1)
	}
}

// promoJobCheck is a staging job check named smoke, running image, with
// what a pod needs besides (node selector, tolerations) as YAML flow
// fields.
func promoJobCheck(image, podExtra string) string {
	return fmt.Sprintf(`    auto: true
    checks:
    - name: smoke
      job:
        timeout: 90s
        template: {template: {spec: {%scontainers: [{name: smoke, image: %q}]}}}`, podExtra, image)
}

// TestPromotionJobCheck: a job check in staging runs a Job in staging's
// namespace, labelled for fluxd; on kwok its pod completes with exit 0,
// so the bundle passes and is verified.
func TestPromotionJobCheck(t *testing.T) {
	sharedFluxd(t) // the stack
	const prefix = "pr4-"
	img := stack.Registry + "/" + prefix + "web:"
	_, env := promoSetup(t, prefix, promoPipelineWith(prefix, promoJobCheck(img+"1.0.0", "")))
	allVerified(t, env)

	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.1.0")
	runsImage(t, prefix+"staging", img+"1.1.0", 3*time.Minute)
	m := waitStages(t, env, "staging verifies 1.1.0 after its job check", 3*time.Minute, stageIs("staging", "verified"))
	b1 := m["staging"].Current.Bundle
	if _, tags := promoRecords(t, env); tags[b1] != "1.1.0" {
		t.Fatalf("staging's verified bundle %s is of %s, want 1.1.0's", b1, tags[b1])
	}
	if !strings.Contains(strings.Join(m["staging"].Current.Passed, ","), "smoke") {
		t.Errorf("staging's bundle passed %v, want the smoke check", m["staging"].Current.Passed)
	}

	jobs, err := kubeClient(t).BatchV1().Jobs(prefix+"staging").List(context.Background(), metav1.ListOptions{LabelSelector: gates.LabelStage + "=staging," + gates.LabelCheck + "=smoke"})
	if err != nil {
		t.Fatal(err)
	}
	var job *batchv1.Job
	for i, j := range jobs.Items {
		if b := j.Labels[gates.LabelBundle]; b != "" && (strings.HasPrefix(b, b1) || strings.HasPrefix(b1, b)) {
			job = &jobs.Items[i]
		}
	}
	if job == nil {
		t.Fatalf("no Job for bundle %s labelled fluxd.io/stage=staging,fluxd.io/check=smoke in %sstaging: %d others", b1, prefix, len(jobs.Items))
	}
	if job.Labels[gates.LabelPipeline] == "" || job.Status.Succeeded != 1 {
		t.Errorf("Job %s: labels %v, %d succeeded; want fluxd.io/pipeline set and one success", job.Name, job.Labels, job.Status.Succeeded)
	}
}

// TestPromotionJobCheckOnTheRealNode: a job check whose container exits 3
// on the real node fails the bundle in staging with the pod's reason,
// shown by fluxctl stages.
func TestPromotionJobCheckOnTheRealNode(t *testing.T) {
	requireRealNode(t)
	sharedFluxd(t) // the stack
	const prefix = "pr5-"
	smoke, err := stack.PushAppImage(testContext(t), prefix+"smoke", "1.0.0", localstack.AppCrash)
	if err != nil {
		t.Fatal(err)
	}
	tol, sel := localstack.OnRealNode()
	onNode := fmt.Sprintf("nodeSelector: {%q: %q}, tolerations: [{key: %q, operator: Exists, effect: NoSchedule}], ",
		"kubernetes.io/hostname", sel["kubernetes.io/hostname"], tol[0].Key)
	// The check comes after start: fluxd checks what staging runs as
	// soon as it starts, and this check always fails.
	img, env := promoSetup(t, prefix, promoPipelineWith(prefix, "    auto: true"))
	allVerified(t, env)
	pushManifest(t, "Check "+prefix+" staging with a Job on the real node", map[string]string{
		promoDir + "/" + prefix + "/pipeline.yaml": promoPipelineWith(prefix, promoJobCheck(smoke, onNode)),
	})

	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.1.0")
	runsImage(t, prefix+"staging", img+"1.1.0", 3*time.Minute)
	m := waitStages(t, env, "the job check fails 1.1.0 in staging", 3*time.Minute, stageIs("staging", "failed"))
	if r := m["staging"].Current.Reason; !strings.Contains(r, "exited with code 3") {
		t.Errorf("staging's bundle failed with %q, want the pod's reason (exited with code 3)", r)
	}
	out, stderr, code := fluxctl(t, env, "stages")
	if code != 0 || !strings.Contains(out, "exited with code 3") {
		t.Errorf("fluxctl stages: exit %d, does not show the pod's reason:\n%s%s", code, out, stderr)
	}
}

// startPromoPrometheus runs the real Prometheus server (Debian's
// prometheus package; make deps installs it) scraping a fluxd's metrics
// at target as job "fluxd" every second, and returns its base URL.
func startPromoPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("the prometheus binary is not on PATH: run make deps (it installs Debian's prometheus package)")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: fluxd
  static_configs: [{targets: [%q]}]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return "http://" + addr
}

// promQuery is the number of series a query returns.
func promQuery(base, q string) (int, error) {
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var doc struct {
		Data struct {
			Result []json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return 0, err
	}
	return len(doc.Data.Result), nil
}

func promoPromCheck(base, op string, threshold float64) string {
	return fmt.Sprintf(`    auto: true
    checks:
    - name: fluxd-up
      prometheus: {url: %q, query: 'up{job="fluxd"}', op: %q, threshold: %v}`, base, op, threshold)
}

// TestPromotionPrometheusCheck: a prometheus check in staging against a
// real Prometheus scraping the promotion fluxd. A query that holds lets
// the bundle be verified; after the Pipeline's threshold is changed so
// that it does not, the next bundle fails with the query's value as the
// reason, shown by fluxctl stages.
func TestPromotionPrometheusCheck(t *testing.T) {
	sharedFluxd(t) // the stack
	const prefix = "pr6-"
	maddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	prom := startPromoPrometheus(t, maddr)
	// The check comes once Prometheus has scraped fluxd: fluxd checks
	// what staging runs as soon as it starts, and a query with no data
	// fails.
	img, env := promoSetup(t, prefix, promoPipelineWith(prefix, "    auto: true"), "--metrics-listen="+maddr)
	if err := poll(context.Background(), time.Minute, func() error {
		if n, err := promQuery(prom, `up{job="fluxd"} == 1`); err != nil || n != 1 {
			return fmt.Errorf("Prometheus has %d up series of fluxd (%v)", n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	allVerified(t, env)
	pushManifest(t, "Check "+prefix+" staging with Prometheus", map[string]string{
		promoDir + "/" + prefix + "/pipeline.yaml": promoPipelineWith(prefix, promoPromCheck(prom, ">", 0)),
	})

	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.1.0")
	runsImage(t, prefix+"staging", img+"1.1.0", 3*time.Minute)
	m := waitStages(t, env, "staging verifies 1.1.0 after its prometheus check", 2*time.Minute, stageIs("staging", "verified"))
	if !strings.Contains(strings.Join(m["staging"].Current.Passed, ","), "fluxd-up") {
		t.Errorf("staging's bundle passed %v, want the fluxd-up check", m["staging"].Current.Passed)
	}
	b1 := m["staging"].Current.Bundle
	if _, tags := promoRecords(t, env); tags[b1] != "1.1.0" {
		t.Fatalf("staging's verified bundle %s is of %s, want 1.1.0's", b1, tags[b1])
	}

	// The same query, now compared with a threshold it is over.
	pushManifest(t, "Tighten "+prefix+" staging's check", map[string]string{
		promoDir + "/" + prefix + "/pipeline.yaml": promoPipelineWith(prefix, promoPromCheck(prom, "<", 0.5)),
	})
	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.2.0")
	runsImage(t, prefix+"staging", img+"1.2.0", 3*time.Minute)
	m = waitStages(t, env, "the prometheus check fails 1.2.0 in staging", 2*time.Minute, stageIs("staging", "failed"))
	reason := m["staging"].Current.Reason
	if m["staging"].Current.Bundle == b1 || !strings.Contains(reason, "check fluxd-up") || !strings.Contains(reason, "= 1, not < 0.5") {
		t.Errorf("staging's bundle %s failed with %q; want 1.2.0's, failed by the query's value over the threshold", m["staging"].Current.Bundle, reason)
	}
	out, stderr, code := fluxctl(t, env, "stages")
	if code != 0 || !strings.Contains(out, "not < 0.5") {
		t.Errorf("fluxctl stages: exit %d, does not show the check's reason:\n%s%s", code, out, stderr)
	}
}

// postApproval posts a signed approval as CI does: the hex HMAC-SHA256,
// under secret, of "TIMESTAMP.BODY".
func postApproval(t *testing.T, addr, secret string, body []byte) (int, string) {
	t.Helper()
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/approve", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Fluxd-Timestamp", ts)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPromotionApprovalWebhook: CI approves prod's waiting bundle with a
// signed POST to fluxd's approval webhook, and prod is promoted; an
// approval signed with another secret (the registry webhooks') is
// refused and approves nothing.
func TestPromotionApprovalWebhook(t *testing.T) {
	sharedFluxd(t) // the stack
	const prefix = "pr7-"
	const approveSecret = "e2e-approve-secret"
	dir := t.TempDir()
	localstack.NoteSecret("the approval webhook's secret", approveSecret)
	hookFile, approveFile := filepath.Join(dir, "webhook-secret"), filepath.Join(dir, "approve-secret")
	if err := os.WriteFile(hookFile, []byte(webhookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(approveFile, []byte(approveSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hook, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	check, _ := healthz(t)
	img, env := promoSetup(t, prefix, promoPipeline(prefix, check),
		"--webhook-listen="+hook, "--webhook-secret-file="+hookFile, "--approve-webhook-secret-file="+approveFile)
	allVerified(t, env)
	head := remoteHead(t)

	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.1.0")
	m := waitStages(t, env, "prod awaits an approval of 1.1.0's bundle", 3*time.Minute, func(m map[string]promoStage) error {
		if len(m["prod"].Waiting) != 1 || m["prod"].Waiting[0].Status != "awaiting approval" {
			return fmt.Errorf("prod waits for %+v", m["prod"].Waiting)
		}
		return nil
	})
	b1 := m["prod"].Waiting[0].Bundle
	out, _, _ := fluxctl(t, env, "stages", "-o", "json")
	var doc struct{ Pipeline string }
	_ = json.Unmarshal([]byte(out), &doc)
	body, _ := json.Marshal(map[string]string{"pipeline": doc.Pipeline, "stage": "prod", "bundle": b1, "by": "ci-build-7"})

	// Signed with the registry webhooks' secret, not the approvals'.
	if code, msg := postApproval(t, hook, webhookSecret, body); code != http.StatusUnauthorized {
		t.Errorf("an approval signed with the wrong secret: %d %s, want 401", code, msg)
	}
	time.Sleep(3 * time.Second) // a loop step or so
	m = promoStages(t, env)
	if w := m["prod"].Waiting; len(w) != 1 || w[0].Bundle != b1 || w[0].Status != "awaiting approval" || len(w[0].Approvers) != 0 {
		t.Errorf("after a badly signed approval prod waits for %+v, want %s with no approver", w, b1)
	}
	if got := deploymentImage(t, prefix+"prod"); got != img+"1.0.0" {
		t.Errorf("prod runs %s after a badly signed approval", got)
	}

	code, msg := postApproval(t, hook, approveSecret, body)
	if code != http.StatusOK || !strings.Contains(msg, `"webhook:ci"`) {
		t.Fatalf("a signed approval: %d %s, want 200 naming webhook:ci", code, msg)
	}
	runsImage(t, prefix+"prod", img+"1.1.0", 3*time.Minute)
	waitRecord(t, env, b1, "prod", "verified", 2*time.Minute)
	if n := promotionCommits(t, head, prefix, b1, "prod"); n != 1 {
		t.Errorf("%d commits promote %s to prod, want 1", n, b1)
	}
	if types := historyTypes(t, env, prefix+"prod:deployment/web"); !containsAll(types, "approved", "promoted") {
		t.Errorf("prod's history types %v lack the approval and promotion", types)
	}
}
