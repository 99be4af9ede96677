package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/localstack"
)

// TestFollowerStatusPageIsLive: two replicas share one history database;
// a browser signed in on the follower's status page gets the leader's
// job as live events (the page's own event stream, no polling): the job
// appears on the jobs page and its page follows it to "succeeded", and
// the page says "live", not "polling: a follower replica".
func TestFollowerStatusPageIsLive(t *testing.T) {
	sharedFluxd(t)
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium: run 'make deps' (hack/deps.sh installs Debian's chromium): %v", err)
	}
	img := faultService(t, "web-follow", "followapp", 1, 0, "1.1.0")
	lease := "fluxd-e2e-webfollow"
	t.Cleanup(func() {
		_ = kubeClient(t).CoordinationV1().Leases("default").Delete(context.Background(), lease, metav1.DeleteOptions{})
	})
	db := filepath.Join(t.TempDir(), "history.db")
	common := []string{"--history-db=" + db, "--leader-elect", "--leader-elect-lease-name=" + lease,
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
		"--rollout-timeout=1m", "--git-poll-interval=10m"}
	aWeb, _ := localstack.FreeAddr()
	bWeb, _ := localstack.FreeAddr()
	a := startFaultFluxd(t, "fluxd-webfollow-a", "web-follow", nil, append(common, "--web-listen="+aWeb)...)
	if err := poll(context.Background(), 30*time.Second, func() error {
		l, err := kubeClient(t).CoordinationV1().Leases("default").Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, a.Addr+"#") {
			return fmt.Errorf("replica a does not lead yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	startFaultFluxd(t, "fluxd-webfollow-b", "web-follow", a.Tokens, append(common, "--web-listen="+bWeb, "--tokens-file="+a.TokensFile)...)
	base := "http://" + bWeb
	waitHTTP(t, base+"/")

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	browse(t, ctx, "sign in on the follower",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.KeyEvent(a.Tokens["deployer"]),
		chromedp.KeyEvent(kb.Tab),
		chromedp.KeyEvent("Follower Tester"),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#services tr[data-service="default:deployment/followapp"]`)),
		waitText(`#conn`, "live"))
	if conn := value(t, ctx, chromedp.Text(chromedp.ID("conn"))); strings.Contains(conn, "polling") {
		t.Errorf("the follower's page says %q", conn)
	}
	// A listener of the page's own event stream, keeping the job
	// events it gets: what arrives there is live, not polled. (The
	// follower's jobs views would call the leader, which needs replica
	// TLS: TestLeaderFailover covers that; the stream does not.)
	browse(t, ctx, "listen",
		chromedp.Evaluate[chromedp.Void](`window.e2eJobs = []; const es2 = new EventSource('/api/events');
			es2.addEventListener('job', e => window.e2eJobs.push(JSON.parse(e.data)));`, chromedp.EvalIgnoreExceptions))
	time.Sleep(time.Second) // the listener's stream is open
	onA := []string{"FLUX_URL=" + a.Addr, "FLUX_TOKEN=" + a.Tokens["deployer"]}
	id := releaseNoWait(t, onA, "-s", "followapp", "-i", img+"1.1.0", "--user", "Leader-User")
	var states []string
	if err := poll(context.Background(), 90*time.Second, func() error {
		states = value(t, ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`window.e2eJobs.filter(u => u.job && u.job.id === %q).map(u => u.job.state + ' ' + u.job.stage)`, id)))
		if len(states) == 0 || !strings.HasPrefix(states[len(states)-1], "JOB_STATE_SUCCEEDED") {
			return fmt.Errorf("job events so far: %v", states)
		}
		return nil
	}); err != nil {
		t.Fatalf("the follower's page did not stream the leader's job %s to its end: %v", id, err)
	}
	t.Logf("job events streamed by the follower's page: %v", states)
	if len(states) < 3 {
		t.Errorf("only %d job events reached the follower's page, want its stages as they came: %v", len(states), states)
	}
}
