package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// These tests change the shared stack's git remote and cluster; they run
// after api_test.go and cli_test.go (go test runs files in name order),
// and put the images back when they end.

func TestReleaseCore(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	reg := stack.Registry
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=alice"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}

	// A workload only in the cluster: listed as not in git, never released.
	createDeployment(t, kc, "drifter", corev1.PodSpec{Containers: []corev1.Container{{Name: "d", Image: reg + "/helloworld:1.0.0"}}})
	// A Kubernetes Service without a selector, the old cause of a whole
	// release failing.
	if _, err := kc.CoreV1().Services("default").Create(context.Background(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "external", Namespace: "default"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.CoreV1().Services("default").Delete(context.Background(), "external", metav1.DeleteOptions{})
	})
	if err := poll(context.Background(), 30*time.Second, func() error {
		out, _, _ := fluxctl(t, viewer, "list-services")
		if !strings.Contains(out, "(not in git)") {
			return fmt.Errorf("drifter not yet listed as not in git:\n%s", out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	t.Run("list-images", func(t *testing.T) {
		out, stderr, code := fluxctl(t, viewer, "list-images", "helloworld")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		// Newest first, the running tag marked, the newer ones starred.
		for _, want := range [][2]string{{"*  1.2.0", "2026-01-03"}, {"*  1.1.0", "2026-01-02"}, {"-> 1.0.0", "2026-01-01"}, {"-> 1.0 ", "2026-01-04"}, {"*  1.1 ", "2026-01-05"}} {
			if !hasLine(out, want[0], want[1]) {
				t.Errorf("list-images lacks a line with %q and %q:\n%s", want[0], want[1], out)
			}
		}
		if strings.Index(out, "1.2.0") > strings.Index(out, "1.1.0") {
			t.Errorf("tags are not newest first:\n%s", out)
		}
		out, _, _ = fluxctl(t, viewer, "list-images", "default:deployment/redis", "--limit", "1")
		if !strings.Contains(out, ": 2 more tags; --offset 1 for the next page, --limit 0 for all") {
			t.Errorf("--limit 1 does not say how many were left out:\n%s", out)
		}
		out, _, _ = fluxctl(t, viewer, "list-images", "default:deployment/redis", "--limit", "1", "--offset", "1")
		if strings.Contains(out, "7.2.0") || !strings.Contains(out, ": 1 more tag; --offset 2 for the next page") {
			t.Errorf("--offset 1 --limit 1 is not the second page:\n%s", out)
		}
	})

	headBefore := remoteHead(t)
	imagesBefore := images(t, kc)

	t.Run("dry run changes nothing", func(t *testing.T) {
		out, stderr, code := fluxctl(t, deployer, "release", "--all", "--update-all-images", "--dry-run")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		for _, want := range []string{
			"Service default:deployment/helloworld\n  Container hello: " + reg + "/helloworld:1.0.0 -> 1.2.0\n  Container sidecar: " + reg + "/sidecar:1.0 -> 1.1\n",
			"Container redis: " + reg + "/redis:7.0.0 -> 7.2.0",
			"Container migrate: " + reg + "/worker:1.0.0 -> 1.1.0",
			"Service default:deployment/drifter\n  Skipped: not in git",
			"Dry run: nothing was changed",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("plan lacks %q:\n%s", want, out)
			}
		}
		if got := remoteHead(t); got != headBefore {
			t.Errorf("remote HEAD moved from %s to %s on a dry run", headBefore, got)
		}
		if got := images(t, kc); fmt.Sprint(got) != fmt.Sprint(imagesBefore) {
			t.Errorf("cluster changed on a dry run:\nbefore %v\nafter  %v", imagesBefore, got)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"unknown service", []string{"release", "-s", "helloworl", "-i", reg + "/helloworld:1.1.0"}, "Did you mean default:deployment/helloworld?"},
			{"bad image", []string{"release", "-s", "helloworld", "-i", "Not An Image!"}, "is not a valid image reference"},
			{"viewer", []string{"release", "-y", "-s", "helloworld", "-i", reg + "/helloworld:1.1.0"}, "needs the deployer role"},
			{"unknown history", []string{"history", "nosuchservice"}, `no service "nosuchservice"`},
			{"file outside", []string{"release", "--file", "../../etc/passwd", "-i", reg + "/redis:7.0.5", "--dry-run"}, "is not a path inside the repository"},
			{"file missing", []string{"release", "--file", "deploy/nope.yaml", "-i", reg + "/redis:7.0.5", "--dry-run"}, "no workload is defined in deploy/nope.yaml"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				env := deployer
				if tc.name == "viewer" {
					env = viewer
				}
				_, stderr, code := fluxctl(t, env, tc.args...)
				if code == 0 || !strings.Contains(stderr, tc.want) {
					t.Errorf("exit %d, stderr lacks %q:\n%s", code, tc.want, stderr)
				}
			})
		}
		// Releasing by file: the services the file defines.
		out, stderr, code := fluxctl(t, deployer, "release", "--file", "deploy/backend.yaml", "-i", reg+"/redis:7.0.5", "--dry-run")
		if code != 0 || !strings.Contains(out, "Container redis: "+reg+"/redis:7.0.0 -> 7.0.5") || !strings.Contains(out, "Service default:deployment/worker\n  Skipped: does not use") || strings.Contains(out, "helloworld") {
			t.Errorf("release --file: exit %d\n%s%s", code, out, stderr)
		}
		// A tag that is not in the registry fails at once, naming the
		// closest tags, and nothing is committed.
		_, stderr, code = fluxctl(t, deployer, "release", "-y", "-s", "helloworld", "-i", reg+"/helloworld:1.2.9")
		if code == 0 || !strings.Contains(stderr, "image helloworld:1.2.9 not found in "+reg) || !strings.Contains(stderr, "closest tags that do exist: 1.2.0") {
			t.Errorf("missing tag: exit %d\n%s", code, stderr)
		}
		if got := remoteHead(t); got != headBefore {
			t.Errorf("remote HEAD moved after failed releases")
		}
		out, _, _ = fluxctl(t, viewer, "history", "worker")
		if !strings.Contains(out, "No events recorded.") {
			t.Errorf("history of a service with no events:\n%s", out)
		}
	})

	t.Run("push refused: nothing applied", func(t *testing.T) {
		hook := filepath.Join(strings.TrimPrefix(stack.GitURL, "file://"), "hooks", "pre-receive")
		if err := os.WriteFile(hook, []byte("#!/bin/sh\necho 'main is protected' >&2\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(hook)
		_, stderr, code := fluxctl(t, deployer, "release", "-y", "-s", "redis", "-i", reg+"/redis:7.0.5")
		if code == 0 || !strings.Contains(stderr, "failed: pushing to "+stack.GitURL) {
			t.Errorf("refused push: exit %d, stderr:\n%s", code, stderr)
		}
		if got := images(t, kc)["redis"]; fmt.Sprint(got) != fmt.Sprint(imagesBefore["redis"]) {
			t.Errorf("redis changed in the cluster although the push failed: %v", got)
		}
	})

	t.Run("execute", func(t *testing.T) {
		// Without a terminal, fluxctl refuses to release unconfirmed.
		_, stderr, code := fluxctl(t, deployer, "release", "--all", "--update-all-images")
		if code == 0 || !strings.Contains(stderr, "needs a confirmation") || remoteHead(t) != headBefore {
			t.Fatalf("release without -y and without a terminal: exit %d\n%s", code, stderr)
		}
		counted := []string{"fluxd_jobs_total", "fluxd_job_duration_seconds_count", "fluxd_release_duration_seconds_count", "fluxd_rollout_duration_seconds_count"}
		countedBefore := map[string]float64{}
		for _, m := range counted {
			countedBefore[m] = metricSum(t, metricsAddr, m)
		}
		pushes := func() float64 {
			return metricWith(t, metricsAddr, "fluxd_git_operation_duration_seconds_count", `operation="push"`, `result="ok"`)
		}
		pushesBefore := pushes()
		out, stderr, code := fluxctl(t, deployer, "release", "-y", "--all", "--update-all-images", "-m", "monthly refresh")
		if code != 0 {
			t.Fatalf("exit %d: %s\n%s", code, stderr, out)
		}
		// The release is counted: a job ended, its release and rollout
		// timed, its commit pushed (fluxctl returns once the job ended).
		for _, m := range counted {
			if got := metricSum(t, metricsAddr, m); got <= countedBefore[m] {
				t.Errorf("%s is %v after a release, %v before: the release is not counted", m, got, countedBefore[m])
			}
		}
		if got := pushes(); got <= pushesBefore {
			t.Errorf("git pushes counted %v after a release, %v before", got, pushesBefore)
		}
		// fluxctl followed the job: its stages, the replica counts while
		// rolling out, and the end.
		for _, want := range []string{": rolling out", "default:deployment/worker: ", "3/3 updated, 3 ready, 3 available", ": done", "Released: commit"} {
			if !strings.Contains(out, want) {
				t.Errorf("release output lacks %q:\n%s", want, out)
			}
		}
		// Exactly one new commit, read from a separate clone with the git CLI.
		clone := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		head := gitCLI(t, clone, "rev-parse", "HEAD")
		if n := gitCLI(t, clone, "rev-list", "--count", headBefore+".."+head); n != "1" {
			t.Fatalf("%s new commits in the remote, want 1", n)
		}
		msg := gitCLI(t, clone, "log", "-1", "--format=%an|%s%n%b")
		if !strings.HasPrefix(msg, "alice|Release ") || !strings.Contains(msg, " to "+instance+" by alice") || !strings.Contains(msg, "monthly refresh") || !strings.Contains(msg, "redis: "+reg+"/redis:7.0.0 -> "+reg+"/redis:7.2.0") {
			t.Errorf("commit message:\n%s", msg)
		}
		// The multi-document file is byte-identical but for the images.
		before := gitCLI(t, clone, "show", headBefore+":deploy/backend.yaml")
		after := gitCLI(t, clone, "show", "HEAD:deploy/backend.yaml")
		want := strings.ReplaceAll(before, reg+"/redis:7.0.0", reg+"/redis:7.2.0")
		want = strings.ReplaceAll(want, reg+"/worker:1.0.0", reg+"/worker:1.1.0")
		if after != want {
			t.Errorf("backend.yaml changed beyond its images:\n--- want\n%s\n--- got\n%s", want, after)
		}
		// The Deployments run the new images, rolled out on the kwok nodes.
		waitRolledOut(t, kc, map[string][]string{
			"helloworld": {"hello=" + reg + "/helloworld:1.2.0", "sidecar=" + reg + "/sidecar:1.1"},
			"redis":      {"redis=" + reg + "/redis:7.2.0"},
			"worker":     {"migrate=" + reg + "/worker:1.1.0", "worker=" + reg + "/worker:1.1.0"},
		})
		// fluxd owns the fields it applied.
		d, err := kc.AppsV1().Deployments("default").Get(context.Background(), "redis", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		managers := ""
		for _, mf := range d.ManagedFields {
			managers += mf.Manager + " "
		}
		if !strings.Contains(managers, "fluxd ") {
			t.Errorf("field managers = %q; want fluxd among them", managers)
		}
		// History shows the release, for the service and overall.
		out, _, code = fluxctl(t, viewer, "history", "redis", "-o", "json")
		if code != 0 || !strings.Contains(out, `"type": "release"`) || !strings.Contains(out, `"to": "`+reg+`/redis:7.2.0"`) || !strings.Contains(out, `"commit": "`+head+`"`) || !strings.Contains(out, `"user": "alice"`) {
			t.Errorf("history redis:\n%s", out)
		}
		out, _, _ = fluxctl(t, viewer, "history")
		if !strings.Contains(out, "release") || !strings.Contains(out, "failed") {
			t.Errorf("history should show the release and the failed push:\n%s", out)
		}
		// Nothing newer now: a second release commits nothing.
		out, _, _ = fluxctl(t, deployer, "release", "-y", "--all", "--update-all-images")
		if !strings.Contains(out, "Nothing to release") || remoteHead(t) != head {
			t.Errorf("second release:\n%s", out)
		}
	})

	t.Run("release one image back", func(t *testing.T) {
		out, stderr, code := fluxctl(t, deployer, "release", "-y", "-s", "default/helloworld", "-s", "redis", "-i", reg+"/helloworld:1.0.0")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(out, "Container hello: "+reg+"/helloworld:1.2.0 -> 1.0.0") || !strings.Contains(out, "Service default:deployment/redis\n  Skipped: does not use") {
			t.Errorf("output:\n%s", out)
		}
		waitRolledOut(t, kc, map[string][]string{"helloworld": {"hello=" + reg + "/helloworld:1.0.0", "sidecar=" + reg + "/sidecar:1.1"}})
	})
}

// TestAutomationAndLocks runs after TestReleaseCore (same file, later):
// it pushes a newer tag, which changes what "latest" means.
func TestAutomationAndLocks(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	reg := stack.Registry
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=bob"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}

	t.Run("lock", func(t *testing.T) {
		if _, stderr, code := fluxctl(t, deployer, "lock", "redis", "-m", "incident 42"); code != 0 {
			t.Fatalf("lock: %s", stderr)
		}
		// Named explicitly, a locked service is refused unless --force.
		_, stderr, code := fluxctl(t, deployer, "release", "-s", "redis", "-i", reg+"/redis:7.0.5", "--dry-run")
		if code == 0 || !strings.Contains(stderr, "default:deployment/redis is locked by bob: incident 42") || !strings.Contains(stderr, "--force") {
			t.Errorf("explicit release of a locked service: exit %d\n%s", code, stderr)
		}
		out, _, _ := fluxctl(t, deployer, "release", "-s", "redis", "-i", reg+"/redis:7.0.5", "--dry-run", "--force")
		if !strings.Contains(out, "Container redis:") {
			t.Errorf("--force did not release the locked service:\n%s", out)
		}
		out, _, _ = fluxctl(t, deployer, "release", "--all", "--update-all-images", "--dry-run")
		if !strings.Contains(out, "Service default:deployment/redis\n  Skipped: locked by bob: incident 42") {
			t.Errorf("--all did not skip the locked service with who and why:\n%s", out)
		}
		clone := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		if yaml := gitCLI(t, clone, "show", "HEAD:deploy/backend.yaml"); !strings.Contains(yaml, `fluxd.io/locked-by: "bob"`) || !strings.Contains(yaml, `fluxd.io/locked-at: "20`) {
			t.Errorf("the lock's user and time are not in git:\n%s", yaml)
		}
		out, _, _ = fluxctl(t, viewer, "list-services")
		if !hasLine(out, "default:deployment/redis", "locked") {
			t.Errorf("list-services does not show the lock:\n%s", out)
		}
		if _, stderr, code := fluxctl(t, deployer, "unlock", "redis"); code != 0 {
			t.Fatalf("unlock: %s", stderr)
		}
		out, _, _ = fluxctl(t, deployer, "release", "-s", "redis", "-i", reg+"/redis:7.0.5", "--dry-run")
		if !strings.Contains(out, "Container redis:") {
			t.Errorf("after unlock the release is still skipped:\n%s", out)
		}
	})

	t.Run("automate releases a newly pushed tag", func(t *testing.T) {
		before := remoteHead(t)
		out, stderr, code := fluxctl(t, deployer, "automate", "helloworld")
		if code != 0 {
			t.Fatalf("automate: exit %d: %s%s", code, out, stderr)
		}
		clone := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		if yaml := gitCLI(t, clone, "show", "HEAD:deploy/helloworld.yaml"); !strings.Contains(yaml, `fluxd.io/automated: "true"`) || !strings.Contains(yaml, "# the app itself") {
			t.Fatalf("the automate commit did not add the annotation (or lost a comment):\n%s", yaml)
		}
		// The automator may already have released a newer tag on top
		// (it acts at once; on PostgreSQL it was seen to win the race
		// with this clone): count the automate commits only.
		if n := gitCLI(t, clone, "rev-list", "--count", "--grep=^Automate default:deployment/helloworld", before+"..HEAD"); n != "1" {
			t.Errorf("automate made %s commits; want 1", n)
		}
		out, _, _ = fluxctl(t, viewer, "list-services")
		if !hasLine(out, "default:deployment/helloworld", "automated") {
			t.Errorf("list-services does not show automation:\n%s", out)
		}

		// A newer image is pushed to the registry.
		if err := stack.PushImage(context.Background(), "helloworld", "1.3.0", time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		// As a registry webhook would: refresh now and wake the automator.
		if out, stderr, code := fluxctl(t, deployer, "notify", reg+"/helloworld:1.3.0"); code != 0 || !strings.Contains(out, "Refreshed "+reg+"/helloworld: 4 tags") {
			t.Errorf("fluxctl notify: exit %d\n%s%s", code, out, stderr)
		}
		want := "hello=" + reg + "/helloworld:1.3.0"
		waitRolledOut(t, kc, map[string][]string{"helloworld": {want, "sidecar=" + reg + "/sidecar:1.1"}})
		gitCLI(t, clone, "pull", "-q")
		if yaml := gitCLI(t, clone, "show", "HEAD:deploy/helloworld.yaml"); !strings.Contains(yaml, reg+"/helloworld:1.3.0 # the app itself") {
			t.Errorf("the automated commit is not in git:\n%s", yaml)
		}
		if msg := gitCLI(t, clone, "log", "-1", "--format=%an|%s"); !strings.HasPrefix(msg, "automator|Release "+reg+"/helloworld:1.3.0 to "+instance) {
			t.Errorf("automated commit: %s", msg)
		}
		out, _, _ = fluxctl(t, viewer, "history", "helloworld")
		if !strings.Contains(out, "automated-release") || !strings.Contains(out, "automate ") {
			t.Errorf("history lacks the automate and the automated release:\n%s", out)
		}
		if _, stderr, code := fluxctl(t, deployer, "deautomate", "helloworld"); code != 0 {
			t.Fatalf("deautomate: %s", stderr)
		}
	})
}

// TestJobs runs last among the release tests: it queues jobs, cancels
// one, and checks that a confirmed plan is refused once git has moved.
func TestJobs(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	reg := stack.Registry
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}

	t.Run("queued jobs run one after the other", func(t *testing.T) {
		jobID := func(out string) string {
			for _, line := range strings.Split(out, "\n") {
				if rest, ok := strings.CutPrefix(line, "Job "); ok {
					return strings.Fields(rest)[0]
				}
			}
			t.Fatalf("no job ID in:\n%s", out)
			return ""
		}
		outA, stderr, code := fluxctl(t, deployer, "release", "-y", "--no-wait", "-s", "redis", "-i", reg+"/redis:7.0.5")
		if code != 0 {
			t.Fatalf("A: %s", stderr)
		}
		outB, stderr, code := fluxctl(t, deployer, "release", "-y", "--no-wait", "-s", "worker", "-i", reg+"/worker:1.0.1")
		if code != 0 {
			t.Fatalf("B: %s", stderr)
		}
		outC, stderr, code := fluxctl(t, deployer, "release", "-y", "--no-wait", "-s", "helloworld", "-i", reg+"/helloworld:1.1.0")
		if code != 0 {
			t.Fatalf("C: %s", stderr)
		}
		a, b, c := jobID(outA), jobID(outB), jobID(outC)
		// Cancel C: queued behind A and B, or already running but not yet
		// pushed; either way nothing of it may reach git.
		out, stderr, code := fluxctl(t, deployer, "cancel", c)
		if code != 0 {
			t.Fatalf("cancel: %s", stderr)
		}
		t.Logf("cancel: %s", out)
		for _, id := range []string{a, b} {
			out, stderr, code := fluxctl(t, deployer, "job", id, "--watch")
			if code != 0 || !strings.Contains(out, "Released: commit") {
				t.Fatalf("job %s: exit %d\n%s%s", id, code, out, stderr)
			}
		}
		out, _, code = fluxctl(t, deployer, "job", c, "--watch")
		if code == 0 || !strings.Contains(out, "job "+c) {
			t.Errorf("the cancelled job reports success:\n%s", out)
		}
		out, _, _ = fluxctl(t, deployer, "jobs", "-o", "json")
		var jobs []struct{ ID, State, Commit string }
		if err := json.Unmarshal([]byte(out), &jobs); err != nil {
			t.Fatal(err)
		}
		commits := map[string]string{}
		for _, j := range jobs {
			commits[j.ID] = j.Commit
			if j.ID == c && (j.State != "cancelled" || j.Commit != "") {
				t.Errorf("job C: %+v; want cancelled with nothing pushed", j)
			}
		}
		// Never interleaved: B's commit sits right on top of A's.
		clone := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		if parent := gitCLI(t, clone, "rev-parse", commits[b]+"^"); parent != commits[a] {
			t.Errorf("B's parent is %s, want A's commit %s", parent, commits[a])
		}
		if got := gitCLI(t, clone, "rev-parse", "HEAD"); got != commits[b] {
			t.Errorf("HEAD is %s, want B's commit (C must not have pushed)", got)
		}
		waitRolledOut(t, kc, map[string][]string{"redis": {"redis=" + reg + "/redis:7.0.5"}})
	})

	t.Run("a confirmed plan is refused once its service changed in git", func(t *testing.T) {
		c := fluxdv1.NewFluxServiceClient(dial(t, f.Addr))
		ctx := withToken(testContext(t), f.Tokens["deployer"])
		spec := &fluxdv1.ReleaseSpec{Services: []string{"redis"}, Image: reg + "/redis:7.2.0", User: "erin"}
		plan, err := c.Release(ctx, &fluxdv1.ReleaseRequest{Spec: spec, Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN})
		if err != nil {
			t.Fatal(err)
		}
		before := remoteHead(t)
		// Someone changes the service's manifest after the plan was shown
		// (a commit elsewhere would not refuse it: see the fault suite).
		clone := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		backend := filepath.Join(clone, stack.GitPath, "backend.yaml")
		b, err := os.ReadFile(backend)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(b), "kind: Deployment\nmetadata:\n  name: redis\n", "kind: Deployment\nmetadata:\n  name: redis\n  labels: {tier: cache}\n", 1)
		if edited == string(b) {
			t.Fatalf("backend.yaml has no redis Deployment to edit:\n%s", b)
		}
		if err := os.WriteFile(backend, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
		gitCLI(t, clone, "add", ".")
		gitCLI(t, clone, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "Label redis")
		gitCLI(t, clone, "push", "-q", "origin", stack.GitBranch)
		moved := remoteHead(t)
		_, err = c.Release(ctx, &fluxdv1.ReleaseRequest{Spec: spec, Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE, Checksum: plan.GetPlan().GetChecksum()})
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "default:deployment/redis's manifest changed in git") {
			t.Fatalf("execute with a stale checksum: %v; want FailedPrecondition", err)
		}
		if got := remoteHead(t); got != moved || got == before {
			t.Errorf("remote HEAD %s; want the other client's commit %s kept and nothing added", got, moved)
		}
	})
}

// TestFailingRollout runs after TestJobs: an image whose pods never
// become ready (the stack's kwok stage for tags containing "broken").
func TestFailingRollout(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	reg := stack.Registry
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=frank"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	if err := stack.PushImage(context.Background(), "redis", "7.3.0-broken", time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	good := images(t, kc)["redis"]

	t.Run("fails at the deadline and rolls back", func(t *testing.T) {
		before := remoteHead(t)
		out, stderr, code := fluxctl(t, deployer, "release", "-y", "-s", "redis", "-i", reg+"/redis:7.3.0-broken", "--rollout-timeout", "4s", "--rollback-on-failure")
		if code == 0 {
			t.Fatalf("a release whose pods never become ready succeeded:\n%s", out)
		}
		for _, want := range []string{"the rollout of default:deployment/redis failed", "CrashLoopBackOff", "rolled back in commit"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("error lacks %q:\n%s", want, stderr)
			}
		}
		if !strings.Contains(out, ": rolling back") {
			t.Errorf("fluxctl did not show the rollback:\n%s", out)
		}
		clone := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		if n := gitCLI(t, clone, "rev-list", "--count", before+"..HEAD"); n != "2" {
			t.Errorf("%s commits since the release began; want the release and its revert", n)
		}
		if subj := gitCLI(t, clone, "log", "-1", "--format=%s"); !strings.HasPrefix(subj, "Revert release") {
			t.Errorf("HEAD is %q, want the revert commit", subj)
		}
		if yaml := gitCLI(t, clone, "show", "HEAD:deploy/backend.yaml"); strings.Contains(yaml, "broken") {
			t.Errorf("the revert left the broken image in git")
		}
		waitRolledOut(t, kc, map[string][]string{"redis": good})
		out, _, _ = fluxctl(t, viewer, "history", "redis")
		if !strings.Contains(out, "rollback") || !strings.Contains(out, "failed") {
			t.Errorf("history lacks the rollback and the failure:\n%s", out)
		}
	})

	t.Run("cancel after the push rolls back", func(t *testing.T) {
		out, stderr, code := fluxctl(t, deployer, "release", "-y", "--no-wait", "-s", "redis", "-i", reg+"/redis:7.3.0-broken", "--rollout-timeout", "60s")
		if code != 0 {
			t.Fatalf("%s%s", out, stderr)
		}
		id := strings.Fields(strings.SplitN(out, "Job ", 2)[1])[0]
		if err := poll(context.Background(), 30*time.Second, func() error {
			out, _, _ := fluxctl(t, viewer, "job", id)
			if !strings.Contains(out, "rolling out") {
				return fmt.Errorf("not rolling out yet:\n%s", out)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// While it rolls out (and never finishes), a second release waits
		// in the queue: cancelling it drops it.
		other := reg + "/worker:1.0.0"
		if strings.Contains(fmt.Sprint(images(t, kc)["worker"]), other) {
			other = reg + "/worker:1.1.0"
		}
		out, stderr, code = fluxctl(t, deployer, "release", "-y", "--no-wait", "-s", "worker", "-i", other)
		if code != 0 || !strings.Contains(out, "queued") {
			t.Fatalf("second release: %s%s", out, stderr)
		}
		queued := strings.Fields(strings.SplitN(out, "Job ", 2)[1])[0]
		out, _, _ = fluxctl(t, viewer, "job", queued)
		if !strings.Contains(out, "queued (position 1 in the queue)") {
			t.Errorf("the second job does not show its queue position:\n%s", out)
		}
		head := remoteHead(t)
		out, stderr, code = fluxctl(t, deployer, "cancel", queued)
		if code != 0 || !strings.Contains(out, "cancelled; nothing was pushed") {
			t.Fatalf("cancel queued: exit %d\n%s%s", code, out, stderr)
		}
		// Cancelling the running job after its push rolls it back.
		out, stderr, code = fluxctl(t, deployer, "cancel", id)
		if code != 0 || !strings.Contains(out, "rolled back") {
			t.Fatalf("cancel: exit %d\n%s%s", code, out, stderr)
		}
		_, stderr, code = fluxctl(t, viewer, "job", id, "--watch")
		if code == 0 || !strings.Contains(stderr, "was cancelled") || !strings.Contains(stderr, "rolled back in commit") {
			t.Errorf("job after cancel: exit %d\n%s", code, stderr)
		}
		waitRolledOut(t, kc, map[string][]string{"redis": good})
		clone := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		if log := gitCLI(t, clone, "log", "--format=%s", head+"..HEAD"); !strings.HasPrefix(log, "Revert release") || strings.Contains(log, "worker") {
			t.Errorf("after the cancels, the remote has:\n%s\nwant only the revert (nothing of the cancelled queued job)", log)
		}
	})
}

// TestRestartTakesOverTheRunningJob kills a fluxd in the middle of a
// rollout and starts it again on the same state: the job that had pushed
// is taken over (applied and followed again, never committed twice), and
// a cancel then rolls it back.
func TestRestartTakesOverTheRunningJob(t *testing.T) {
	sharedFluxd(t)
	ctx := testContext(t)
	kc := kubeClient(t)
	reg := stack.Registry
	bin := filepath.Join(binDir, "fluxd")
	f, err := stack.StartNamedFluxd(ctx, "fluxd-restart", bin, instance, nil)
	if err != nil {
		t.Fatalf("%v (log: %s)", err, stack.Log("fluxd-restart"))
	}
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=gina"}
	// The broken image is pushed here too, so this test runs alone
	// (TestFailingRollout pushes the same one; a second push is a no-op).
	if err := stack.PushImage(ctx, "redis", "7.3.0-broken", time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	good := images(t, kc)["redis"]
	out, stderr, code := fluxctl(t, env, "release", "-y", "--no-wait", "-s", "redis", "-i", reg+"/redis:7.3.0-broken", "--rollout-timeout", "120s")
	if code != 0 {
		t.Fatalf("%s%s", out, stderr)
	}
	id := strings.Fields(strings.SplitN(out, "Job ", 2)[1])[0]
	job := func() (j struct{ ID, State, Stage, Commit, Error string }) {
		out, _, code := fluxctl(t, env, "jobs", "-o", "json")
		var jobs []struct{ ID, State, Stage, Commit, Error string }
		if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil {
			t.Fatalf("jobs: exit %d\n%s", code, out)
		}
		for _, j := range jobs {
			if j.ID == id {
				return j
			}
		}
		t.Fatalf("job %s is not listed: %s", id, out)
		return
	}
	if err := poll(ctx, 30*time.Second, func() error {
		if j := job(); j.Stage != "rolling out" {
			return fmt.Errorf("not rolling out yet: %+v", j)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	f.Wait(10 * time.Second)
	f, err = stack.StartNamedFluxd(ctx, "fluxd-restart", bin, instance, f.Tokens)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	env[0] = "FLUX_URL=" + f.Addr
	if err := poll(ctx, 30*time.Second, func() error {
		if j := job(); j.State != "running" || j.Stage != "rolling out" || j.Commit == "" {
			return fmt.Errorf("not taken over yet: %+v", j)
		}
		return nil
	}); err != nil {
		t.Fatalf("after the restart: %v\nlog: %s", err, stack.Log("fluxd-restart"))
	}
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	if n := gitCLI(t, clone, "rev-list", "--count", "--grep=Fluxd-Job: "+id, "HEAD"); n != "1" {
		t.Errorf("the job has %s commits; the take-over must not commit again", n)
	}
	if out, stderr, code := fluxctl(t, env, "cancel", id); code != 0 {
		t.Fatalf("cancel: %s%s", out, stderr)
	}
	if err := poll(ctx, 60*time.Second, func() error {
		if j := job(); j.State != "cancelled" {
			return fmt.Errorf("not cancelled yet: %+v", j)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, kc, map[string][]string{"redis": good})
	out, _, _ = fluxctl(t, env, "history", "redis")
	if !strings.Contains(out, "rollback") {
		t.Errorf("history lacks the rollback of the taken-over job:\n%s", out)
	}
	_ = f.Signal(syscall.SIGTERM)
}

// createDeployment creates a one-replica Deployment in default that exists
// only in the cluster, not in git, and deletes it when the test ends.
func createDeployment(t *testing.T, kc kubernetes.Interface, name string, pod corev1.PodSpec) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
	if _, err := kc.AppsV1().Deployments("default").Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.AppsV1().Deployments("default").Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}
