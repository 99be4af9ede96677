package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fluxctl install's output, customised, is accepted by the API server in
// its namespace under restricted Pod Security, as the kustomize base is
// (TestDeployManifests proves what its RBAC allows and forbids).
func TestFluxctlInstallIsAccepted(t *testing.T) {
	sharedFluxd(t)
	ctx := testContext(t)
	kc := kubeClient(t)
	const ns, watched = "fluxd-install", "fluxd-install-apps"
	out, stderr, code := fluxctl(t, nil, "install", "--namespace", ns, "--watch-namespace", watched,
		"--git-url", "ssh://git@git.example/org/manifests.git", "--git-path", "clusters/a", "--image", stack.Registry+"/fluxd:test")
	if code != 0 {
		t.Fatalf("fluxctl install: exit %d\n%s", code, stderr)
	}
	t.Cleanup(func() {
		for _, n := range []string{ns, watched} {
			_ = kc.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	// Namespaces exist before a server-side dry run of what goes in them.
	var nsDoc string
	for _, doc := range strings.Split(out, "\n---\n") {
		if strings.Contains(doc, "\nkind: Namespace\n") {
			nsDoc = doc
		}
	}
	if nsDoc == "" || !strings.Contains(nsDoc, "name: "+ns) || !strings.Contains(nsDoc, "pod-security.kubernetes.io/enforce: restricted") {
		t.Fatalf("no restricted Namespace %s in the output:\n%s", ns, out)
	}
	kubectl := filepath.Join(stackBinDir(t), "kubectl")
	env := []string{"KUBECONFIG=" + stack.Kubeconfig}
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if o, e, c := run(t, env, kubectl, "apply", "-f", write("ns.yaml", nsDoc)); c != 0 {
		t.Fatalf("creating the namespace: %s%s", o, e)
	}
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: watched}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o, e, c := run(t, env, kubectl, "apply", "--dry-run=server", "-f", write("install.yaml", out))
	if c != 0 {
		t.Fatalf("kubectl apply --dry-run=server of fluxctl install's output: exit %d\n%s%s", c, o, e)
	}
	if strings.Contains(e, "PodSecurity") {
		t.Errorf("the install warns about Pod Security:\n%s", e)
	}
	for _, want := range []string{"deployment.apps/fluxd created (server dry run)", "rolebinding.rbac.authorization.k8s.io/fluxd-workloads-" + ns + " created (server dry run)", "secret/fluxd-git created (server dry run)"} {
		if !strings.Contains(o, want) {
			t.Errorf("the dry run lacks %q:\n%s", want, o)
		}
	}
	// Applied, then applied again unchanged: kubectl says every object is
	// unchanged, so that re-running the install shows only what changed.
	if o, e, c := run(t, env, kubectl, "apply", "-f", write("install.yaml", out)); c != 0 {
		t.Fatalf("kubectl apply of fluxctl install's output: exit %d\n%s%s", c, o, e)
	}
	o, e, c = run(t, env, kubectl, "apply", "-f", write("install.yaml", out))
	if c != 0 {
		t.Fatalf("applying the install again: exit %d\n%s%s", c, o, e)
	}
	for _, line := range strings.Split(strings.TrimSpace(o), "\n") {
		// kubectl's client-side apply always sends a PodDisruptionBudget's
		// selector (its patch strategy is "replace"), so it says
		// "configured" for it whatever changed; kubectl diff below shows
		// nothing did.
		if !strings.HasSuffix(line, " unchanged") && line != "poddisruptionbudget.policy/fluxd configured" {
			t.Errorf("applying the same install again: %q; want every object unchanged", line)
		}
	}
	if o, e, c := run(t, env, kubectl, "diff", "-f", write("install.yaml", out)); c != 0 {
		t.Errorf("kubectl diff of the applied install: exit %d, want 0 (no difference)\n%s%s", c, o, e)
	}

	// The HA variant: two replicas with --leader-elect on the PostgreSQL
	// database of a Secret, accepted as well; what the server would store
	// has them.
	ha, stderr, code := fluxctl(t, nil, "install", "--namespace", ns, "--watch-namespace", watched,
		"--git-url", "https://git.example/org/manifests.git", "--image", stack.Registry+"/fluxd:test",
		"--replicas", "2", "--history-db-secret", "fluxd-history-db")
	if code != 0 {
		t.Fatalf("fluxctl install --replicas 2: exit %d\n%s", code, stderr)
	}
	o, e, c = run(t, env, kubectl, "apply", "--dry-run=server", "-o", "yaml", "-f", write("install-ha.yaml", ha))
	if c != 0 {
		t.Fatalf("kubectl apply --dry-run=server of fluxctl install --replicas 2: exit %d\n%s%s", c, o, e)
	}
	for _, want := range []string{"replicas: 2", "- --leader-elect", "- --history-db=$(HISTORY_DB)", "secretName: fluxd-history-db", "type: RollingUpdate"} {
		if !strings.Contains(o, want) {
			t.Errorf("the HA install as the server would store it lacks %q", want)
		}
	}
	if _, stderr, code := fluxctl(t, nil, "install", "--git-url", "https://git.example/r.git", "--replicas", "2"); code == 0 || !strings.Contains(stderr, "--history-db-secret") {
		t.Errorf("fluxctl install --replicas 2 without a database: exit %d, %s; want a refusal naming --history-db-secret", code, stderr)
	}
}
