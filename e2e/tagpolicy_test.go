package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTagPolicies automates four services under tag filters in one push:
// a semver range, a semver level, a glob by build time, and a locked one.
// The automator releases the three it may in one job and one commit,
// applies them, and never touches the locked one.
func TestTagPolicies(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	reg := stack.Registry
	ctx := testContext(t)
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}

	// Builds: versions in order, then main-* builds where the newest
	// build (main-bbb) is not the last by name (main-ccc).
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.2.3", "1.2.9", "1.3.0", "2.0.0", "2.1.0-rc.1", "main-aaa", "main-ccc", "main-bbb"} {
		if err := stack.PushImage(ctx, "policyapp", tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	auto := func(extra map[string]string) map[string]string {
		m := map[string]string{"fluxd.io/automated": "true", "fluxd.io/automated-by": instance}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	app := reg + "/policyapp:"
	setup := pushManifest(t, "Add policy services", map[string]string{"deploy/policies.yaml": policyDeployment("pol-range", app+"1.2.3", auto(map[string]string{"fluxd.io/tag-all": "semver:~1.2"})) +
		policyDeployment("pol-minor", app+"1.2.3", auto(map[string]string{"fluxd.io/tag.app": "semver:minor"})) +
		policyDeployment("pol-glob", app+"main-aaa", auto(map[string]string{"fluxd.io/tag-all": "glob:main-*"})) +
		policyDeployment("pol-locked", app+"1.2.3", auto(map[string]string{"fluxd.io/tag-all": "semver:major", "fluxd.io/locked": "true", "fluxd.io/locked-by": "carol", "fluxd.io/lock-message": "release freeze"}))})

	want := map[string][]string{
		"pol-range": {"app=" + app + "1.2.9"},
		"pol-minor": {"app=" + app + "1.3.0"},
		"pol-glob":  {"app=" + app + "main-bbb"},
	}
	waitRolledOut(t, kc, want)

	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	log := gitCLI(t, clone, "log", "--format=%an|%s", setup+"..HEAD")
	if lines := strings.Split(log, "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "automator|Release ") {
		t.Fatalf("want one automated commit for the three services, got:\n%s", log)
	}
	body := gitCLI(t, clone, "log", "-1", "--format=%B")
	for _, s := range []string{"default:deployment/pol-range", "default:deployment/pol-minor", "default:deployment/pol-glob", "Fluxd-Job: "} {
		if !strings.Contains(body, s) {
			t.Errorf("the batched commit does not name %s:\n%s", s, body)
		}
	}
	yaml := gitCLI(t, clone, "show", "HEAD:deploy/policies.yaml")
	if n := strings.Count(yaml, "image: "+app+"1.2.3"); n != 1 {
		t.Errorf("the locked service's image changed in git (%d services on 1.2.3, want only it):\n%s", n, yaml)
	}
	if _, err := kc.AppsV1().Deployments("default").Get(ctx, "pol-locked", metav1.GetOptions{}); err == nil {
		t.Errorf("the locked service was applied to the cluster")
	}

	// Each service's history names its own image (recorded as the job
	// ends, just after the rollout).
	for name, imgs := range want {
		var out string
		if err := poll(ctx, 30*time.Second, func() error {
			out, _, _ = fluxctl(t, viewer, "history", name, "-o", "json")
			if !strings.Contains(out, "automated-release") || !strings.Contains(out, strings.TrimPrefix(imgs[0], "app=")) {
				return fmt.Errorf("history of %s lacks its automated release of %s:\n%s", name, imgs[0], out)
			}
			// Its own row: the batch's other services are not in it.
			for other := range want {
				if other != name && strings.Contains(out, "deployment/"+other+`"`) {
					return fmt.Errorf("history of %s has a row naming %s:\n%s", name, other, out)
				}
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
	}

	// The locked service's plan says who locked it and why.
	_, stderr, code := fluxctl(t, deployer, "release", "-s", "pol-locked", "--update-all-images", "--dry-run")
	if code == 0 || !strings.Contains(stderr, "locked by carol: release freeze") {
		t.Errorf("plan of the locked service: exit %d\n%s", code, stderr)
	}

	// list-services shows the filters and where automation is.
	out, _, _ := fluxctl(t, viewer, "list-services", "-o", "json")
	var services []struct {
		ID         string            `json:"id"`
		TagFilters map[string]string `json:"tagFilters"`
		Automation *struct {
			State    string `json:"state"`
			Decision string `json:"decision"`
		} `json:"automation"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &services); err != nil {
		t.Fatalf("list-services -o json: %v\n%s", err, out)
	}
	seen := 0
	for _, s := range services {
		switch s.ID {
		case "default:deployment/pol-range":
			seen++
			if s.TagFilters["*"] != "semver:~1.2" || s.Automation == nil || s.Automation.State == "" {
				t.Errorf("pol-range in list-services: %+v (automation %+v)", s, s.Automation)
			}
		case "default:deployment/pol-minor":
			seen++
			if s.TagFilters["app"] != "semver:minor" {
				t.Errorf("pol-minor in list-services: %+v", s)
			}
		}
	}
	if seen != 2 {
		t.Errorf("list-services lacks the policy services:\n%s", out)
	}

	t.Run("policy command", func(t *testing.T) {
		// A bad pattern is refused, naming the problem; nothing is committed.
		head := remoteHead(t)
		_, stderr, code := fluxctl(t, deployer, "policy", "pol-glob", "--tag-all", "regex:main-(")
		if code == 0 || !strings.Contains(stderr, "bad regular expression") {
			t.Errorf("bad regex: exit %d\n%s", code, stderr)
		}
		_, stderr, code = fluxctl(t, deployer, "policy", "pol-glob", "--tag", "nosuch=glob:x-*")
		if code == 0 || !strings.Contains(stderr, `has no container "nosuch"`) || !strings.Contains(stderr, "app") {
			t.Errorf("unknown container: exit %d\n%s", code, stderr)
		}
		if remoteHead(t) != head {
			t.Fatalf("a refused policy change moved the remote")
		}
		// A filter that matches no tag is set, then shows as a warning in
		// list-services and list-images.
		out, stderr, code := fluxctl(t, deployer, "policy", "pol-glob", "--tag", "app=glob:release-*", "--deautomate")
		if code != 0 || !strings.Contains(out, "tag filter for app: glob:release-*") {
			t.Fatalf("policy: exit %d\n%s%s", code, out, stderr)
		}
		gitCLI(t, clone, "pull", "-q")
		yaml := gitCLI(t, clone, "show", "HEAD:deploy/policies.yaml")
		if !strings.Contains(yaml, `fluxd.io/tag.app: "glob:release-*"`) || gitCLI(t, clone, "log", "-1", "--format=%an") != "erin" {
			t.Errorf("the policy commit:\n%s", yaml)
		}
		out, _, _ = fluxctl(t, viewer, "list-images", "pol-glob")
		if !strings.Contains(out, "warning: tag filter glob:release-* matches none of the") || !strings.Contains(out, "(filtered out)") {
			t.Errorf("list-images does not warn about the filter that passes nothing:\n%s", out)
		}
		// "*" clears the filter; the regex with a backslash survives YAML.
		out, stderr, code = fluxctl(t, deployer, "policy", "pol-glob", "--tag", "app=*", "--tag-all", `regex:^main-\w+$`, "--tag-order", "alphabetical")
		if code != 0 {
			t.Fatalf("policy: exit %d\n%s%s", code, out, stderr)
		}
		out, _, _ = fluxctl(t, viewer, "list-images", "pol-glob", "-o", "json")
		var rows []struct {
			Filter string `json:"filter"`
			Best   string `json:"best"`
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].Filter != `regex:^main-\w+$` || rows[0].Best != "main-ccc" {
			t.Errorf("after the regex with alphabetical order, list-images: %v\n%s", err, out)
		}
	})
}
