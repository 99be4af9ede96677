package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// After an automated release, list-services shows git's new image at
// once: its commit tells the listings git moved, as a manual release's
// does, so the service is not shown drifted with the old image as "git
// says" until the next poll (here 10 minutes away).
func TestAutomatedReleaseShowsGitAtOnce(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	img := faultService(t, "ux-auto", "uxauto", 1, 1, "1.1.0")
	f := startFaultFluxd(t, "fluxd-uxauto", "ux-auto", nil, "--git-poll-interval=10m", "--automation-short-wait=1s", "--automation-long-wait=2s")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=uma"}
	if out, stderr, code := fluxctl(t, env, "automate", "uxauto"); code != 0 {
		t.Fatalf("automate: exit %d\n%s%s", code, out, stderr)
	}
	goal := func() (string, string) {
		out, stderr, code := fluxctl(t, env, "list-services", "-o", "json")
		var svcs []struct {
			ID         string `json:"id"`
			Containers []struct {
				Name, Image, Goal string
			} `json:"containers"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &svcs) != nil {
			t.Fatalf("list-services: exit %d\n%s%s", code, out, stderr)
		}
		for _, s := range svcs {
			if strings.HasSuffix(s.ID, "/uxauto") && len(s.Containers) == 1 {
				return s.Containers[0].Image, s.Containers[0].Goal
			}
		}
		t.Fatalf("uxauto is not listed:\n%s", out)
		return "", ""
	}
	goal() // a listing that reads git, before the automated release
	waitRolledOut(t, kc, map[string][]string{"uxauto": {"app=" + img + "1.1.0"}})
	// The push came before the apply; give the listing one fetch.
	deadline := time.Now().Add(5 * time.Second)
	for {
		image, g := goal()
		if g == "" && image == img+"1.1.0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the automated release, list-services says the container runs %s and git says %q; want git's new image, with no goal", image, g)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The daily loop as a user types it: a release by a bare tag, the job's
// who, what and log, then `fluxctl rollback`, which goes back through git
// to the image before, with one commit.
func TestRollbackAndJobView(t *testing.T) {
	sharedFluxd(t)
	kc := kubeClient(t)
	img := faultService(t, "ux-rb", "uxrb", 1, 1, "1.1.0")
	f := startFaultFluxd(t, "fluxd-uxrb", "ux-rb", nil, "--git-poll-interval=10m")
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=vera"}

	// A tag alone is the service's own repository.
	out, stderr, code := fluxctl(t, env, "release", "-s", "deployment/uxrb", "-i", "1.1.0", "-y")
	if code != 0 {
		t.Fatalf("release by a bare tag: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{"uxrb": {"app=" + img + "1.1.0"}})
	out, stderr, code = fluxctl(t, env, "jobs", "-o", "json")
	var jobs []jobJSON
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) == 0 {
		t.Fatalf("jobs: exit %d\n%s%s", code, out, stderr)
	}
	j := jobs[0]
	out, _, _ = fluxctl(t, env, "jobs")
	if !strings.Contains(out, "vera") || !strings.Contains(out, "uxrb app: "+img+"1.0.0 -> 1.1.0") {
		t.Errorf("jobs does not say who released what:\n%s", out)
	}
	out, stderr, code = fluxctl(t, env, "job", j.ID, "--log")
	if code != 0 || !strings.Contains(out, "User:") || !strings.Contains(out, "vera") || !strings.Contains(out, "Log:") || !strings.Contains(out, "done") {
		t.Errorf("job --log: exit %d\n%s%s", code, out, stderr)
	}

	before := remoteHead(t)
	out, stderr, code = fluxctl(t, env, "rollback", "uxrb", "-y")
	if code != 0 || !strings.Contains(out, img+"1.1.0") {
		t.Fatalf("rollback: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{"uxrb": {"app=" + img + "1.0.0"}})
	if got := commitsSince(t, before, "ux-rb"); len(got) != 1 || !strings.Contains(got[0], img+"1.0.0") {
		t.Errorf("commits after the rollback: %q; want one releasing 1.0.0", got)
	}
}
