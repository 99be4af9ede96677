package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFluxV1WorkloadAutomatedByNotification: a workload as a Flux v1
// repository has it (fluxcd.io/automated, fluxcd.io/tag.<container>:
// semver:~1.2, no fluxd.io/ annotation) is automated by fluxd through an
// image notification, within its Flux v1 filter; `fluxctl lock` on it then
// writes Flux v1's fluxcd.io/locked.
func TestFluxV1WorkloadAutomatedByNotification(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	ctx := testContext(t)
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	app := stack.Registry + "/fluxv1app:"
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	if err := stack.PushImage(ctx, "fluxv1app", "1.2.0", t0); err != nil {
		t.Fatal(err)
	}
	const path = "deploy/fluxv1.yaml"
	pushManifest(t, "Add a Flux v1 workload", map[string]string{path: policyDeployment("fluxv1", app+"1.2.0",
		map[string]string{"fluxcd.io/automated": "true", "fluxcd.io/tag.app": "semver:~1.2"})})
	t.Cleanup(func() { removeManifest(t, path, "fluxv1") })

	// fluxd reads it as automated with the Flux v1 filter.
	if err := poll(ctx, 60*time.Second, func() error {
		out, _, _ := fluxctl(t, viewer, "list-services", "-o", "json")
		if !strings.Contains(out, "default:deployment/fluxv1") || !strings.Contains(out, "semver:~1.2") {
			return fmt.Errorf("list-services does not show fluxv1 with its Flux v1 filter:\n%s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// New builds: one inside ~1.2, one outside it. A notification releases
	// the one inside.
	for i, tag := range []string{"1.2.7", "1.3.0"} {
		if err := stack.PushImage(ctx, "fluxv1app", tag, t0.Add(time.Duration(i+1)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if out, stderr, code := fluxctl(t, deployer, "notify", app+"1.3.0"); code != 0 {
		t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{"fluxv1": {"app=" + app + "1.2.7"}})
	if y := gitShowRemote(t, path); !strings.Contains(y, "image: "+app+"1.2.7") || !strings.Contains(y, `fluxcd.io/automated: "true"`) {
		t.Errorf("git after the automated release:\n%s", y)
	}

	// A lock keeps the Flux v1 prefix.
	if out, stderr, code := fluxctl(t, deployer, "lock", "fluxv1", "-m", "incident 7"); code != 0 {
		t.Fatalf("lock: exit %d\n%s%s", code, out, stderr)
	}
	y := gitShowRemote(t, path)
	for _, want := range []string{`fluxcd.io/locked: "true"`, `fluxcd.io/locked_msg: "incident 7"`, `fluxcd.io/locked_user: "erin"`} {
		if !strings.Contains(y, want) {
			t.Errorf("after fluxctl lock, git lacks %s:\n%s", want, y)
		}
	}
	if strings.Contains(y, "fluxd.io/locked:") {
		t.Errorf("after fluxctl lock, git has fluxd's own lock on a Flux v1 workload:\n%s", y)
	}
}

// TestFluxV1FilterAnnotation: a workload automated as Flux v1's fluxctl
// reference writes it with the other filter form, fluxcd.io/automated and
// filter.fluxcd.io/app: semver:~4.0, is held to 4.0.x: a notification of
// 5.0.0 releases 4.0.2, never 5.0.0. `fluxctl policy --tag` then updates
// filter.fluxcd.io/app where it is, with no fluxcd.io/tag.app beside it.
func TestFluxV1FilterAnnotation(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	ctx := testContext(t)
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	app := stack.Registry + "/fluxv1filter:"
	t0 := time.Date(2026, 4, 2, 0, 0, 0, 0, time.UTC)
	if err := stack.PushImage(ctx, "fluxv1filter", "4.0.1", t0); err != nil {
		t.Fatal(err)
	}
	const path = "deploy/fluxv1filter.yaml"
	pushManifest(t, "Add a Flux v1 workload with filter.fluxcd.io/", map[string]string{path: policyDeployment("fluxv1filter", app+"4.0.1",
		map[string]string{"fluxcd.io/automated": "true", "filter.fluxcd.io/app": "semver:~4.0"})})
	t.Cleanup(func() { removeManifest(t, path, "fluxv1filter") })

	if err := poll(ctx, 60*time.Second, func() error {
		out, _, _ := fluxctl(t, viewer, "list-services", "-o", "json")
		if !strings.Contains(out, "default:deployment/fluxv1filter") || !strings.Contains(out, "semver:~4.0") {
			return fmt.Errorf("list-services does not show fluxv1filter with its filter.fluxcd.io/ filter:\n%s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// 5.0.0 is the newest build; 4.0.2 is the newest in ~4.0.
	for i, tag := range []string{"4.0.2", "5.0.0"} {
		if err := stack.PushImage(ctx, "fluxv1filter", tag, t0.Add(time.Duration(i+1)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if out, stderr, code := fluxctl(t, deployer, "notify", app+"5.0.0"); code != 0 {
		t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{"fluxv1filter": {"app=" + app + "4.0.2"}})
	// The automator waits 1–2 s in this fluxd; give it several times that
	// to release 5.0.0 if it would.
	time.Sleep(8 * time.Second)
	y := gitShowRemote(t, path)
	if !strings.Contains(y, "image: "+app+"4.0.2") || !strings.Contains(y, `filter.fluxcd.io/app: "semver:~4.0"`) {
		t.Errorf("git after the automated release; want 4.0.2 under filter.fluxcd.io/app: semver:~4.0:\n%s", y)
	}
	waitRolledOut(t, kc, map[string][]string{"fluxv1filter": {"app=" + app + "4.0.2"}})

	// A filter set with fluxctl is written where the workload keeps it.
	if out, stderr, code := fluxctl(t, deployer, "policy", "fluxv1filter", "--tag", "app=semver:~4.1"); code != 0 {
		t.Fatalf("policy: exit %d\n%s%s", code, out, stderr)
	}
	y = gitShowRemote(t, path)
	if !strings.Contains(y, "filter.fluxcd.io/app: ") || !strings.Contains(y, "semver:~4.1") || strings.Contains(y, "tag.app") || strings.Contains(y, "semver:~4.0") {
		t.Errorf("after fluxctl policy --tag app=semver:~4.1, git does not hold filter.fluxcd.io/app: semver:~4.1 alone:\n%s", y)
	}
}
