package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/internal/pgserver"
)

// TestPromotionAcrossClusters is item 6 of the promotion issue: dev runs
// in the stack's cluster (A), staging in a second, light cluster (B) the
// test starts. Each cluster has its own fluxd (its own kubeconfig, its own
// git path holding the same Pipeline and its stage's Deployment), and the
// two share one PostgreSQL database. A release to dev through A's fluxd
// is verified there; B's fluxd promotes it into staging on B, with a
// commit of its own; `fluxctl stages` on either shows both stages, and
// says which one is the other cluster's.
func TestPromotionAcrossClusters(t *testing.T) {
	sharedFluxd(t) // the stack
	ctx := testContext(t)
	const prefix = "xc-"
	repo := prefix + "web"
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0"} {
		if err := stack.PushImage(ctx, repo, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	img := stack.Registry + "/" + repo + ":"

	start := time.Now()
	b, err := stack.StartCluster(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	t.Logf("cluster B started in %v", time.Since(start).Round(10*time.Millisecond))
	kcB := clusterClient(t, b.Kubeconfig)
	defer func() { t.Logf("cluster B's processes at the end: %s", rssOf(b.PIDs())) }()

	pipeline := fmt.Sprintf(`apiVersion: fluxd.io/v1
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
    soak: 1s
`, prefix)
	dirA, dirB := promoDir+"/"+prefix+"a", promoDir+"/"+prefix+"b"
	devM, stagingM := promoDeployment(prefix+"dev", img+"1.0.0"), promoDeployment(prefix+"staging", img+"1.0.0")
	head := pushManifest(t, "Add the cross-cluster pipeline", map[string]string{
		dirA + "/pipeline.yaml": pipeline, dirA + "/dev.yaml": devM,
		dirB + "/pipeline.yaml": pipeline, dirB + "/staging.yaml": stagingM,
	})
	kubectlApply(t, devM)
	t.Cleanup(func() {
		_ = kubeClient(t).CoreV1().Namespaces().Delete(context.Background(), prefix+"dev", metav1.DeleteOptions{})
	})
	applyTo(t, b.Kubeconfig, stagingM)
	runsImage(t, prefix+"dev", img+"1.0.0", 2*time.Minute)
	runsImageIn(t, kcB, prefix+"staging", img+"1.0.0", 2*time.Minute)

	// One PostgreSQL database, two fluxds: A's on the stack's cluster,
	// B's on cluster B.
	srv := pgserver.Own(t)
	localstack.NoteSecret("the PostgreSQL password", srv.Password)
	url, err := srv.CreateDatabase(context.Background(), "fluxd")
	if err != nil {
		t.Fatal(err)
	}
	// Each leads by a Lease of the same name in its own cluster.
	db := []string{"--history-db=" + url, "--history-db-password-file=" + srv.PasswordFile(), "--git-poll-interval=2s",
		"--leader-elect", "--leader-elect-lease-name=fluxd-xc"}
	fA := startFaultFluxd(t, "fluxd-xc-a", dirA, nil, append(db, "--cluster-name=a")...)
	fB := startFaultFluxd(t, "fluxd-xc-b", dirB, nil, append(db, "--cluster-name=b", "--kubeconfig="+b.Kubeconfig)...)
	envA := []string{"FLUX_URL=" + fA.Addr, "FLUX_TOKEN=" + fA.Tokens["deployer"], "USER=alice"}
	envB := []string{"FLUX_URL=" + fB.Addr, "FLUX_TOKEN=" + fB.Tokens["deployer"], "USER=alice"}

	// What runs at start is each stage's first bundle: dev's observed by
	// A, staging's by B.
	for _, env := range [][]string{envA, envB} {
		waitStages(t, env, "both stages verify what they run", 2*time.Minute, func(m map[string]promoStage) error {
			for _, st := range []string{"dev", "staging"} {
				if err := stageIs(st, "verified")(m); err != nil {
					return err
				}
			}
			return nil
		})
	}

	// A release to dev through A: verified there, promoted into staging by
	// B, on B.
	released := time.Now()
	job := releaseNoWait(t, envA, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.1.0")
	if !strings.HasPrefix(job, "a.") {
		t.Errorf("A's release job is %q, want an ID of cluster a", job)
	}
	runsImage(t, prefix+"dev", img+"1.1.0", 2*time.Minute)
	runsImageIn(t, kcB, prefix+"staging", img+"1.1.0", 3*time.Minute)
	var bundle string
	for i, env := range [][]string{envA, envB} {
		m := waitStages(t, env, "staging verifies dev's new bundle", 2*time.Minute, func(m map[string]promoStage) error {
			if err := stageIs("staging", "verified")(m); err != nil {
				return err
			}
			if d, s := m["dev"].Current, m["staging"].Current; d == nil || d.Bundle != s.Bundle {
				return fmt.Errorf("staging runs %s, dev %+v", s.Bundle, d)
			}
			return nil
		})
		bundle = m["staging"].Current.Bundle
		if m["staging"].Current.PromotedBy != "fluxd" {
			t.Errorf("staging's bundle was promoted by %q, want fluxd", m["staging"].Current.PromotedBy)
		}
		away, here := "staging", "dev"
		if i == 1 {
			away, here = "dev", "staging"
		}
		if h := m[away].Hold; !strings.Contains(h, "not in this fluxd's cluster") {
			t.Errorf("fluxd %c shows %s's hold as %q, want it named another cluster's", 'A'+i, away, h)
		}
		if h := m[here].Hold; strings.Contains(h, "cluster") {
			t.Errorf("fluxd %c shows its own %s as %q", 'A'+i, here, h)
		}
	}
	t.Logf("release to dev to staging verified on B: %v", time.Since(released).Round(100*time.Millisecond))
	if got := deploymentImage(t, prefix+"dev"); got != img+"1.1.0" {
		t.Errorf("dev runs %s", got)
	}
	// Nothing of staging's reached cluster A, nor dev's cluster B.
	if _, err := kubeClient(t).AppsV1().Deployments(prefix+"staging").Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Error("cluster A has a staging Deployment")
	}
	if _, err := kcB.AppsV1().Deployments(prefix+"dev").Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Error("cluster B has a dev Deployment")
	}

	// Neither fluxd tried to act on the other's stage (A's attempt to
	// promote into staging would fail its plan: staging is not in A's
	// git path, nor in A's cluster).
	for _, name := range []string{"fluxd-xc-a", "fluxd-xc-b"} {
		b, err := os.ReadFile(stack.Log(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "promotion step") {
				t.Errorf("%s's loop failed a step: %s", name, l)
			}
		}
	}

	// Each cluster's Lease is held by its own fluxd.
	holders := map[string]string{}
	for name, kc := range map[string]kubernetes.Interface{"A": kubeClient(t), "B": kcB} {
		l, err := kc.CoordinationV1().Leases("default").Get(ctx, "fluxd-xc", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			t.Fatalf("cluster %s's Lease fluxd-xc: %v", name, err)
		}
		holders[name] = *l.Spec.HolderIdentity
	}
	if holders["A"] == holders["B"] {
		t.Errorf("both clusters' Leases are held by %q", holders["A"])
	}

	// One promotion commit, by fluxd, in B's path.
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	log := gitCLI(t, clone, "log", "--format=%an|%s", head+"..HEAD", "--", dirA, dirB)
	if strings.Count(log, "Promote bundle") != 1 || !strings.Contains(log, "Promote bundle "+bundle+" to staging") {
		t.Errorf("want one commit promoting %s to staging, got:\n%s", bundle, log)
	}
	if strings.Contains(gitCLI(t, clone, "log", "--format=%s", head+"..HEAD", "--", dirA), "Promote") {
		t.Errorf("a promotion commit touched A's path:\n%s", log)
	}

	// A promotion by hand into staging asked of A is refused, saying why.
	out, stderr, code := fluxctl(t, envA, "promote", "--to", "staging", bundle, "-y")
	if code == 0 || !strings.Contains(out+stderr, "does not promote into staging") {
		t.Errorf("fluxctl promote --to staging through A: exit %d\n%s%s", code, out, stderr)
	}
}

func clusterClient(t *testing.T, kubeconfig string) *kubernetes.Clientset {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 500, 1000
	return kubernetes.NewForConfigOrDie(rc)
}

func applyTo(t *testing.T, kubeconfig, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := run(t, []string{"KUBECONFIG=" + kubeconfig}, filepath.Join(stackBinDir(t), "kubectl"), "apply", "-f", f)
	if code != 0 {
		t.Fatalf("kubectl apply: %s%s", out, stderr)
	}
}

// runsImageIn is runsImage on another cluster's client.
func runsImageIn(t *testing.T, kc kubernetes.Interface, ns, image string, timeout time.Duration) {
	t.Helper()
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

// rssOf says each process's resident memory, from /proc.
func rssOf(pids map[string]int) string {
	var out []string
	for name, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmRSS:") {
				out = append(out, name+" "+strings.Join(strings.Fields(strings.TrimPrefix(l, "VmRSS:")), " "))
			}
		}
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}
