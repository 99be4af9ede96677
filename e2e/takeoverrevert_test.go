package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A release a person reverts while fluxd is stopped is not reported as a
// success by the fluxd that takes its job over: the job fails, saying git
// no longer holds the release, applies nothing, and the person's image is
// what runs. (Issue 26, item 7, on the real stack.)
func TestTakeOverOfARevertedReleaseFails(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	img := faultService(t, "faults-revert", "revapp", 1, 0, "1.1.0-broken", "1.0.1-hotfix")
	name := "fluxd-revert"
	f := startFaultFluxd(t, name, "faults-revert", nil, "--shutdown-grace=5s", "--git-poll-interval=10m")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=olga"}
	id := releaseNoWait(t, env, "-s", "revapp", "-i", img+"1.1.0-broken", "--rollout-timeout", "60s")
	if job := waitJob(t, env, id, 60*time.Second, rollingOut); job.Commit == "" {
		t.Fatalf("rolling out without a commit: %+v", job)
	}
	if err := f.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !f.Wait(30 * time.Second) {
		t.Fatalf("fluxd %d still runs 30 s after SIGTERM", f.PID)
	}
	// While fluxd is down, on-call reverts the release to a hotfix, by
	// hand, and applies it.
	m := rollingManifest("revapp", img+"1.0.1-hotfix", 1, 0)
	pushManifest(t, "Revert revapp to the hotfix", map[string]string{"faults-revert/revapp.yaml": m})
	kubectlApply(t, m)

	f = startFaultFluxd(t, name, "faults-revert", f.Tokens, "--shutdown-grace=5s", "--git-poll-interval=10m")
	env[0] = "FLUX_URL=" + f.Addr
	job := waitJob(t, env, id, 60*time.Second, ended)
	if job.State != "failed" || !strings.Contains(job.Error, "git no longer holds the release") || !strings.Contains(job.Error, "1.0.1-hotfix") {
		t.Fatalf("the taken-over job ended %+v; want it failed: git no longer holds the release", job)
	}
	waitRolledOut(t, kc, map[string][]string{"revapp": {"app=" + img + "1.0.1-hotfix"}})
	if got := strings.Join(historyTypes(t, env, "revapp"), " "); got != "failed" {
		t.Errorf("history of revapp: %q; want the failed take-over only", got)
	}
}
