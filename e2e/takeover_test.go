package e2e

import (
	"crypto/tls"
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

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/internal/testcerts"
	"github.com/fluxd/fluxd/internal/tlsfiles"
)

// haManifest is the HA pair's one service, name: two replicas that roll
// out one at a time and count as available only after 3 s, so that a
// rollout lasts long enough to kill the leader in the middle of it.
func haManifest(name, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
  annotations:
    fluxd.io/automated: "true"
    fluxd.io/automated-by: %[2]q
    fluxd.io/tag-all: "semver:^1"
spec:
  replicas: 2
  minReadySeconds: 3
  strategy:
    type: RollingUpdate
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: app
          image: %[3]s
`, name, instance, image)
}

// TestLeaderFailover runs two fluxd replicas with leader election on one
// SQLite history file, against their own manifests directory (ha/) with
// long automation waits. A notification sent to the follower is forwarded
// to the leader, whose automator releases at once. Then the leader is
// killed with SIGKILL in the middle of an automated rollout: the follower
// takes the lease, takes the job over, and finishes it; git has one
// commit, the cluster the new image, and the history one release.
func TestLeaderFailover(t *testing.T) {
	sharedFluxd(t)
	db := filepath.Join(t.TempDir(), "ha-history.db")
	testLeaderFailover(t, "haapp", "ha", "--history-db="+db)
}

// TestLeaderFailoverPostgres is TestLeaderFailover with replicas that
// share nothing but a PostgreSQL database: each has its own state
// directory (clone, SSH key), and the jobs and history they hand over
// live in the server the test starts.
func TestLeaderFailoverPostgres(t *testing.T) {
	sharedFluxd(t)
	url, srv := pgserver.Database(t)
	localstack.NoteSecret("the PostgreSQL password", srv.Password)
	testLeaderFailover(t, "hapg", "hapg", "--history-db="+url, "--history-db-password-file="+srv.PasswordFile())
}

// testLeaderFailover is the failover story for service name, its
// manifests in dir, the replicas given dbFlags.
func testLeaderFailover(t *testing.T, name, dir string, dbFlags ...string) {
	haLease := "fluxd-e2e-" + name
	replicaA, replicaB := "fluxd-"+name+"-a", "fluxd-"+name+"-b"
	ctx := testContext(t)
	kc := kubeClient(t)
	app := stack.Registry + "/" + name + ":"
	t0 := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	if err := stack.PushImage(ctx, name, "1.0.0", t0); err != nil {
		t.Fatal(err)
	}
	// The service runs 1.0.0 in the cluster and in git.
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(2)), MinReadySeconds: 3,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr(intstr.FromInt32(1)), MaxUnavailable: ptr(intstr.FromInt32(0))}},
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: app + "1.0.0"}}}},
		},
	}
	if _, err := kc.AppsV1().Deployments("default").Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kc.AppsV1().Deployments("default").Delete(ctx, name, metav1.DeleteOptions{})
		_ = kc.CoordinationV1().Leases("default").Delete(ctx, haLease, metav1.DeleteOptions{})
	})
	pushManifest(t, "Add the HA service", map[string]string{dir + "/" + name + ".yaml": haManifest(name, app+"1.0.0")})
	waitRolledOut(t, kc, map[string][]string{name: {"app=" + app + "1.0.0"}})

	// Two replicas: one database, their own clones, one tokens file.
	bin := filepath.Join(binDir, "fluxd")
	// The replicas speak mutual TLS: one certificate for both (it names
	// 127.0.0.1 for fluxctl and fluxd-replica for each other), signed by
	// the replica CA, which followers require of the leader.
	pki := t.TempDir()
	replicaCA := testcerts.NewCA(t, "replica-ca")
	replicaCA.WriteFiles(t, filepath.Join(pki, "replica-ca.crt"), "")
	replicaCA.WriteLeaf(t, pki, testcerts.Leaf{Name: "replica", DNSNames: []string{"fluxd-replica"}})
	caFile := filepath.Join(pki, "replica-ca.crt")
	common := []string{"--tls-cert-file=" + filepath.Join(pki, "replica.crt"), "--tls-key-file=" + filepath.Join(pki, "replica.key"), "--replica-ca-file=" + caFile,
		"--git-path=" + dir, "--leader-elect", "--leader-elect-lease-name=" + haLease,
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
		"--automation-long-wait=10m", "--automation-short-wait=10m", "--git-poll-interval=10m", "--rollout-timeout=90s"}
	secretFile := filepath.Join(t.TempDir(), "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(webhookSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	aHook, _ := localstack.FreeAddr()
	bHook, _ := localstack.FreeAddr()
	hooks := func(addr string) []string {
		return append(append(append([]string(nil), common...), dbFlags...), "--webhook-listen="+addr, "--webhook-secret-file="+secretFile)
	}
	a, err := stack.StartNamedFluxd(ctx, replicaA, bin, instance, nil, hooks(aHook)...)
	if err != nil {
		t.Fatalf("%v (log: %s)", err, stack.Log(replicaA))
	}
	t.Cleanup(func() { _ = a.Signal(syscall.SIGKILL) })
	holder := func() string {
		l, err := kc.CoordinationV1().Leases("default").Get(ctx, haLease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	if err := poll(ctx, 20*time.Second, func() error {
		if h := holder(); !strings.HasPrefix(h, a.Addr+"#") {
			return fmt.Errorf("lease held by %q, want replica a (%s)", h, a.Addr)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b, err := stack.StartNamedFluxd(ctx, replicaB, bin, instance, a.Tokens, append(hooks(bHook), "--tokens-file="+a.TokensFile)...)
	if err != nil {
		t.Fatalf("%v (log: %s)", err, stack.Log(replicaB))
	}
	t.Cleanup(func() { _ = b.Signal(syscall.SIGTERM) })
	onB := []string{"FLUX_URL=https://" + b.Addr, "FLUX_CA_FILE=" + caFile, "FLUX_TOKEN=" + a.Tokens["deployer"], "USER=frank"}
	jobs := func() []jobJSON {
		out, stderr, code := fluxctl(t, onB, "jobs", "-o", "json")
		var js []jobJSON
		if code != 0 || json.Unmarshal([]byte(out), &js) != nil {
			t.Fatalf("jobs on the follower: exit %d\n%s%s", code, out, stderr)
		}
		return js
	}

	// A push and a notification to the follower: the leader's automator
	// commits at once, although its waits are ten minutes.
	if err := stack.PushImage(ctx, name, "1.1.0", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if out, stderr, code := fluxctl(t, onB, "notify", app+"1.1.0"); code != 0 {
		t.Fatalf("notify via the follower: %s%s", out, stderr)
	}
	var commitAfter time.Duration
	watch := filepath.Join(t.TempDir(), "watch")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, watch)
	if err := poll(ctx, 60*time.Second, func() error {
		gitCLI(t, watch, "pull", "-q")
		if !strings.Contains(gitCLI(t, watch, "log", "-1", "--format=%s"), app+"1.1.0") {
			return fmt.Errorf("no commit of 1.1.0 yet")
		}
		commitAfter = time.Since(start)
		return nil
	}); err != nil {
		t.Fatalf("%v; leader log: %s", err, stack.Log(replicaA))
	}
	t.Logf("notification to pushed commit: %v (automation waits are 10m)", commitAfter.Round(time.Millisecond))
	waitRolledOut(t, kc, map[string][]string{name: {"app=" + app + "1.1.0"}})
	if err := poll(ctx, 30*time.Second, func() error {
		for _, j := range jobs() {
			if j.State != "succeeded" {
				return fmt.Errorf("job %s is %s", j.ID, j.State)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// The follower's list-services shows the leader's automation state.
	out, _, _ := fluxctl(t, onB, "list-services", "-o", "json")
	var services []struct {
		ID         string
		Automation *struct{ State string }
	}
	if err := json.Unmarshal([]byte(out), &services); err != nil {
		t.Fatalf("list-services on the follower: %v\n%s", err, out)
	}
	for _, s := range services {
		if s.ID == "default:deployment/"+name && (s.Automation == nil || s.Automation.State == "") {
			t.Errorf("the follower's list-services lacks the leader's automation state: %s", out)
		}
	}

	// The next push: kill the leader while the release rolls out.
	if err := stack.PushImage(ctx, name, "1.2.0", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	// This time a registry webhook, sent to the follower, which passes it
	// on to the leader.
	body := `{"events":[{"action":"push","target":{"repository":"` + name + `","tag":"1.2.0"},"request":{"host":"` + stack.Registry + `"}}]}`
	pool, err := tlsfiles.Pool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := hc.Post("https://"+bHook+"/v1/notify?token="+webhookSecret, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(reply), "/"+name) {
		t.Fatalf("webhook to the follower: %s\n%s", resp.Status, reply)
	}
	var victim jobJSON
	if err := poll(ctx, 60*time.Second, func() error {
		for _, j := range jobs() {
			if j.State == "running" && j.Stage == "rolling out" {
				victim = j
				return nil
			}
		}
		return fmt.Errorf("no job rolling out yet")
	}); err != nil {
		t.Fatal(err)
	}
	if err := a.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := poll(ctx, 30*time.Second, func() error {
		if h := holder(); !strings.HasPrefix(h, b.Addr+"#") {
			return fmt.Errorf("lease held by %q, want replica b (%s)", h, b.Addr)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("replica b took the lease %v after the SIGKILL (lease duration 3s)", time.Since(killed).Round(time.Millisecond))
	if err := poll(ctx, 90*time.Second, func() error {
		for _, j := range jobs() {
			if j.ID == victim.ID {
				if j.State != "succeeded" {
					return fmt.Errorf("job %s: %s/%s %s", j.ID, j.State, j.Stage, j.Error)
				}
				return nil
			}
		}
		return fmt.Errorf("job %s is gone", victim.ID)
	}); err != nil {
		t.Fatalf("the taken-over job did not finish: %v\nlog of b: %s", err, stack.Log(replicaB))
	}
	waitRolledOut(t, kc, map[string][]string{name: {"app=" + app + "1.2.0"}})

	// One commit per release, whoever finished it.
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	for _, tag := range []string{"1.1.0", "1.2.0"} {
		if n := gitCLI(t, clone, "rev-list", "--count", "--grep=^Release .*"+name+":"+tag, "HEAD"); n != "1" {
			t.Errorf("%s commits release %s:%s; want exactly 1", n, name, tag)
		}
	}
	if n := gitCLI(t, clone, "rev-list", "--count", "--grep=Fluxd-Job: "+victim.ID, "HEAD"); n != "1" {
		t.Errorf("the taken-over job has %s commits; want 1", n)
	}
	// The history, read from the follower turned leader: one automated
	// release per image, nothing failed.
	out, _, _ = fluxctl(t, onB, "history", name, "-o", "json")
	var events []struct {
		Type    string
		Changes []struct{ To string }
	}
	if err := json.Unmarshal([]byte(out), &events); err != nil {
		t.Fatalf("history: %v\n%s", err, out)
	}
	released := map[string]int{}
	for _, ev := range events {
		if ev.Type == "failed" {
			t.Errorf("history has a failure: %s", out)
		}
		if ev.Type == "automated-release" {
			for _, c := range ev.Changes {
				released[c.To]++
			}
		}
	}
	if released[app+"1.1.0"] != 1 || released[app+"1.2.0"] != 1 {
		t.Errorf("history's automated releases: %v; want one each of 1.1.0 and 1.2.0\n%s", released, out)
	}
	if log, _ := os.ReadFile(stack.Log(replicaB)); !strings.Contains(string(log), "taking it over") {
		t.Errorf("replica b's log does not say it took the job over")
	}

	// A leader stopped with SIGTERM (a rolling upgrade) lets its work
	// stop, then gives the lease up itself: a replica started again takes
	// it without waiting for it to expire.
	aHook2, _ := localstack.FreeAddr()
	a2, err := stack.StartNamedFluxd(ctx, replicaA, bin, instance, a.Tokens, append(hooks(aHook2), "--tokens-file="+a.TokensFile)...)
	if err != nil {
		t.Fatalf("%v (log: %s)", err, stack.Log(replicaA))
	}
	t.Cleanup(func() { _ = a2.Signal(syscall.SIGKILL) })
	if err := b.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := poll(ctx, 30*time.Second, func() error {
		if h := holder(); !strings.HasPrefix(h, a2.Addr+"#") {
			return fmt.Errorf("lease held by %q, want the restarted replica a (%s)", h, a2.Addr)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if log, _ := os.ReadFile(stack.Log(replicaB)); !strings.Contains(string(log), "gave the lease up after the jobs stopped") {
		t.Errorf("replica b, stopped with SIGTERM while leading, did not give the lease up itself")
	}
}
