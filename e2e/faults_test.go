package e2e

// The fault suite: what operators and users do to a running fluxd and its
// surroundings, on the real stack. Each test asserts what a person would
// check afterwards: the commits in the remote (none lost, none
// duplicated), the images the cluster runs, the history and the job's
// final state.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/githttp"
	"github.com/fluxd/fluxd/internal/localstack"
)

// jobOf returns a job as 'fluxctl jobs -o json' lists it.
func jobOf(t *testing.T, env []string, id string) jobJSON {
	t.Helper()
	out, stderr, code := fluxctl(t, env, "jobs", "-o", "json")
	var jobs []jobJSON
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil {
		t.Fatalf("jobs: exit %d\n%s%s", code, out, stderr)
	}
	for _, j := range jobs {
		if j.ID == id {
			return j
		}
	}
	t.Fatalf("job %s is not listed: %s", id, out)
	return jobJSON{}
}

func rollingOut(j jobJSON) error {
	if j.State != "running" || j.Stage != "rolling out" {
		return fmt.Errorf("not rolling out: %+v", j)
	}
	return nil
}

func ended(j jobJSON) error {
	switch j.State {
	case "succeeded", "failed", "cancelled":
		return nil
	}
	return fmt.Errorf("not ended: %+v", j)
}

// SIGTERM in the middle of a rollout (a rolling upgrade of fluxd, a node
// drain) is not a cancel: fluxd pushes nothing, exits within its grace,
// and the fluxd that starts next takes the job over and follows the
// rollout to its real end: here a failure at the rollout timeout, rolled
// back because the release asked for it. Never "succeeded".
func TestSigtermMidRolloutLeavesTheJobForTheNextFluxd(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	img := faultService(t, "faults-term", "termapp", 1, 0, "1.1.0-broken")
	name := "fluxd-term"
	f := startFaultFluxd(t, name, "faults-term", nil, "--shutdown-grace=5s", "--git-poll-interval=10m")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=olga"}
	id := releaseNoWait(t, env, "-s", "termapp", "-i", img+"1.1.0-broken", "--rollout-timeout", "20s", "--rollback-on-failure")
	job := waitJob(t, env, id, 60*time.Second, rollingOut)
	if job.Commit == "" {
		t.Fatalf("rolling out without a commit: %+v", job)
	}
	head := remoteHead(t)

	if err := f.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to fluxd %d: %v", f.PID, err)
	}
	termed := time.Now()
	if !f.Wait(30 * time.Second) {
		t.Fatalf("fluxd %d did not exit within 30 s of SIGTERM (Kubernetes' default grace)", f.PID)
	}
	t.Logf("fluxd exited %v after SIGTERM (--shutdown-grace=5s)", time.Since(termed).Round(time.Millisecond))
	if got := commitsSince(t, head, "faults-term"); len(got) != 0 {
		t.Fatalf("fluxd pushed on SIGTERM: %q", got)
	}
	if log, _ := os.ReadFile(stack.Log(name)); !strings.Contains(string(log), "left live for the next fluxd") {
		t.Errorf("fluxd's log does not say it left the job for the next fluxd")
	}

	// The next fluxd on the same state takes the job over.
	f = startFaultFluxd(t, name, "faults-term", f.Tokens, "--shutdown-grace=5s", "--git-poll-interval=10m")
	env[0] = "FLUX_URL=" + f.Addr
	job = waitJob(t, env, id, 30*time.Second, func(j jobJSON) error {
		if j.State == "succeeded" {
			t.Fatalf("the taken-over job reported success although its pods never become ready: %+v", j)
		}
		return rollingOut(j)
	})
	if job.Commit == "" {
		t.Errorf("taken over without its commit: %+v", job)
	}
	job = waitJob(t, env, id, 90*time.Second, ended)
	if job.State != "failed" || !strings.Contains(job.Error, "the rollout of default:deployment/termapp failed") || !strings.Contains(job.Error, "rolled back in commit") {
		t.Errorf("the taken-over job ended %+v; want failed at its rollout timeout, rolled back", job)
	}
	if got := commitsSince(t, head, "faults-term"); len(got) != 1 || !strings.HasPrefix(got[0], "Revert release") {
		t.Errorf("commits after the SIGTERM: %q; want only the revert made after the rollout really failed", got)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	if n := gitCLI(t, clone, "rev-list", "--count", "--grep=Fluxd-Job: "+id, "HEAD"); n != "1" {
		t.Errorf("the job has %s commits; want exactly 1", n)
	}
	waitRolledOut(t, kc, map[string][]string{"termapp": {"app=" + img + "1.0.0"}})
	if got := strings.Join(historyTypes(t, env, "termapp"), " "); got != "rollback failed" {
		t.Errorf("history of termapp: %q; want the rollback and the failed release, nothing else", got)
	}
}

// Releases queued behind a slow rollout still run when git moves for
// other reasons: the slow one's rollback commit, a person's push of an
// unrelated file. And a policy command typed right after a push of a new
// manifest finds it, although fluxd's own poll is ten minutes away.
func TestQueuedReleasesSurviveOtherCommits(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	slow := faultService(t, "faults-queue", "qslow", 1, 0, "1.1.0-broken")
	a := faultService(t, "faults-queue", "qa", 1, 0, "1.1.0")
	b := faultService(t, "faults-queue", "qb", 1, 0, "1.1.0")
	f := startFaultFluxd(t, "fluxd-queue", "faults-queue", nil, "--git-poll-interval=10m")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=pia"}

	first := releaseNoWait(t, env, "-s", "qslow", "-i", slow+"1.1.0-broken", "--rollout-timeout", "60s")
	waitJob(t, env, first, 60*time.Second, rollingOut)
	second := releaseNoWait(t, env, "-s", "qa", "-i", a+"1.1.0")
	third := releaseNoWait(t, env, "-s", "qb", "-i", b+"1.1.0")
	// Someone pushes an unrelated file meanwhile.
	pushManifest(t, "Docs", map[string]string{"faults-queue/README.md": "not a manifest\n"})
	if out, stderr, code := fluxctl(t, env, "cancel", first); code != 0 {
		t.Fatalf("cancel: %s%s", out, stderr)
	}
	for _, id := range []string{second, third} {
		if j := waitJob(t, env, id, 90*time.Second, ended); j.State != "succeeded" {
			t.Errorf("queued job %s ended %s: %s", id, j.State, j.Error)
		}
	}
	if j := jobOf(t, env, first); j.State != "cancelled" {
		t.Errorf("the cancelled job is %+v", j)
	}
	waitRolledOut(t, kc, map[string][]string{"qa": {"app=" + a + "1.1.0"}, "qb": {"app=" + b + "1.1.0"}, "qslow": {"app=" + slow + "1.0.0"}})

	// A new service: pushed to git and applied, then locked at once.
	c := stack.Registry + "/qc:"
	if err := stack.PushImage(testContext(t), "qc", "1.0.0", time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if out, _, code := fluxctl(t, env, "list-services"); code != 0 || strings.Contains(out, "qc") {
		t.Fatalf("list-services before the push: %s", out)
	}
	m := rollingManifest("qc", c+"1.0.0", 1, 0)
	kubectlApply(t, m)
	t.Cleanup(func() {
		_ = kc.AppsV1().Deployments("default").Delete(context.Background(), "qc", metav1.DeleteOptions{})
	})
	pushManifest(t, "Add qc", map[string]string{"faults-queue/qc.yaml": m})
	if out, stderr, code := fluxctl(t, env, "lock", "qc", "-m", "just pushed"); code != 0 {
		t.Fatalf("lock right after the push: exit %d\n%s%s", code, out, stderr)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	if y := gitCLI(t, clone, "show", "HEAD:faults-queue/qc.yaml"); !strings.Contains(y, `fluxd.io/lock-message: "just pushed"`) {
		t.Errorf("the lock is not in git:\n%s", y)
	}
}

// gitProxy serves the stack's bare repository over smart HTTP (git's own
// http-backend), with the faults of githttp.Remote; url is the
// repository's http:// URL.
type gitProxy struct {
	*githttp.Remote
	url string
}

func newGitProxy(t *testing.T) *gitProxy {
	t.Helper()
	bare := strings.TrimPrefix(stack.GitURL, "file://")
	gitCLI(t, bare, "config", "http.receivepack", "true")
	r := githttp.Serve(t, filepath.Dir(bare), githttp.Options{})
	return &gitProxy{Remote: r, url: r.RepoURL(bare)}
}

// A git remote that stops answering: list-services, list-images and
// history keep answering, list-services and the metrics show the stall,
// and work resumes when the remote does. Then a person pushes at the very
// moment fluxd pushes a release: both commits are kept, the release's
// once.
func TestGitRemoteStallsAndRecovers(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	img := faultService(t, "faults-stall", "stallapp", 1, 0, "1.1.0")
	proxy := newGitProxy(t)
	metrics, _ := localstack.FreeAddr()
	f := startFaultFluxd(t, "fluxd-stall", "faults-stall", nil, "--git-url="+proxy.url, "--git-timeout=3s", "--git-poll-interval=1s", "--metrics-listen="+metrics)
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=quinn", "FLUX_TIMEOUT=10s"}
	if out, stderr, code := fluxctl(t, env, "list-services"); code != 0 || !strings.Contains(out, "stallapp") {
		t.Fatalf("list-services: %s%s", out, stderr)
	}

	proxy.Stalled.Store(true)
	// The stall shows, named, in list-services and in the metrics.
	if err := poll(context.Background(), 30*time.Second, func() error {
		out, stderr, code := fluxctl(t, env, "list-services")
		if code != 0 {
			return fmt.Errorf("list-services during the stall: exit %d\n%s%s", code, out, stderr)
		}
		if !strings.Contains(out, "Warning: the git remote") {
			return fmt.Errorf("no git warning yet:\n%s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := metric(t, metrics, "fluxd_git_up"); got != "0" {
		t.Errorf("fluxd_git_up = %q during the stall; want 0", got)
	}
	// Reads keep answering; a blocked one would wait for the git timeout
	// (3 s) at least, or forever.
	for _, args := range [][]string{{"list-services"}, {"list-images", "stallapp"}, {"history"}} {
		start := time.Now()
		out, stderr, code := fluxctl(t, env, args...)
		if code != 0 {
			t.Errorf("%v during the stall: exit %d\n%s%s", args, code, out, stderr)
		}
		t.Logf("%v answered in %v during the stall", args, time.Since(start).Round(time.Millisecond))
	}

	proxy.Stalled.Store(false)
	if err := poll(context.Background(), 30*time.Second, func() error {
		if got := metric(t, metrics, "fluxd_git_up"); got != "1" {
			return fmt.Errorf("fluxd_git_up = %q", got)
		}
		return nil
	}); err != nil {
		t.Fatalf("after the remote recovered: %v", err)
	}

	// A push by someone else lands just before fluxd's.
	before := remoteHead(t)
	interposed := false
	push := func() {
		interposed = true
		pushManifest(t, "Someone else's change", map[string]string{"faults-stall/NOTES.md": "pushed during fluxd's push\n"})
	}
	proxy.Interpose.Store(&push)
	out, stderr, code := fluxctl(t, env, "release", "-y", "-s", "stallapp", "-i", img+"1.1.0")
	if code != 0 {
		t.Fatalf("release with a push in between: exit %d\n%s%s\nlog: %s", code, out, stderr, stack.Log("fluxd-stall"))
	}
	if !interposed {
		t.Fatal("the proxy never saw fluxd's push")
	}
	got := commitsSince(t, before, "faults-stall")
	if len(got) != 2 || got[0] != "Someone else's change" || !strings.HasPrefix(got[1], "Release "+img+"1.1.0") {
		t.Errorf("commits since the release began: %q; want the other change, then the release once", got)
	}
	waitRolledOut(t, kc, map[string][]string{"stallapp": {"app=" + img + "1.1.0"}})
	if got := strings.Join(historyTypes(t, env, "stallapp"), " "); got != "release" {
		t.Errorf("history of stallapp: %q; want one release", got)
	}
}

// metricLines reads fluxd's Prometheus endpoint, a line each.
func metricLines(t *testing.T, addr string) []string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return strings.Split(string(b), "\n")
}

// metric reads one unlabelled metric's value from fluxd's endpoint.
func metric(t *testing.T, addr, name string) string {
	t.Helper()
	for _, l := range metricLines(t, addr) {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}

// The cluster's control plane restarts while a job rolls out: fluxd's
// watches reconnect, and the job ends truthfully (here: done, the image
// running), with one commit and one history row.
func TestControlPlaneRestartsDuringAJob(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	img := faultService(t, "faults-cp", "cpapp", 2, 3, "1.1.0", "1.2.0")
	f := startFaultFluxd(t, "fluxd-cp", "faults-cp", nil, "--git-poll-interval=10m")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=rafa"}
	for _, c := range []struct{ component, tag string }{{"kube-apiserver", "1.1.0"}, {"etcd", "1.2.0"}} {
		t.Run(c.component, func(t *testing.T) {
			before := remoteHead(t)
			id := releaseNoWait(t, env, "-s", "cpapp", "-i", img+c.tag, "--rollout-timeout", "120s")
			waitJob(t, env, id, 60*time.Second, rollingOut)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := stack.Restart(ctx, c.component, 2*time.Second); err != nil {
				t.Fatalf("restarting %s: %v", c.component, err)
			}
			j := waitJob(t, env, id, 120*time.Second, ended)
			if j.State != "succeeded" {
				t.Fatalf("job after a %s restart: %+v\nlog: %s", c.component, j, stack.Log("fluxd-cp"))
			}
			waitRolledOut(t, kc, map[string][]string{"cpapp": {"app=" + img + c.tag}})
			if got := commitsSince(t, before, "faults-cp"); len(got) != 1 || !strings.HasPrefix(got[0], "Release "+img+c.tag) {
				t.Errorf("commits: %q; want the release once", got)
			}
		})
	}
	if got := strings.Join(historyTypes(t, env, "cpapp"), " "); got != "release release" {
		t.Errorf("history of cpapp: %q; want two releases", got)
	}
}
