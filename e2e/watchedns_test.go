package e2e

// A release fluxd may not apply, or does not watch, is refused before
// anything is pushed (issue 31, item 6). fluxd runs as the install's
// ServiceAccount (deploy.Render's RBAC, fluxctl install's), watching two
// namespaces: nsw-a, bound by the install, and nsw-c, where a Role of the
// test's lets it read workloads but not patch them. A third, nsw-b, is
// not watched, although fluxd's workload role is bound there too: the
// old fluxd released into it and then reported its rollout "no longer in
// the cluster".

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/fluxd/fluxd/deploy"
	"github.com/fluxd/fluxd/internal/localstack"
)

func TestReleaseRefusesUnwatchedAndForbidden(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	admin := kubeClient(t)
	kubectl := filepath.Join(stackBinDir(t), "kubectl")
	env := []string{"KUBECONFIG=" + stack.Kubeconfig}
	const fluxNS, watched, unwatched, readonly = "nsw-flux", "nsw-a", "nsw-b", "nsw-c"

	// The install, as 'fluxctl install --namespace nsw-flux
	// --watch-namespace nsw-a --watch-namespace nsw-b' renders it; fluxd
	// is then started with --namespaces nsw-a,nsw-c (nsw-b bound, not
	// watched; nsw-c watched, not bound).
	out, err := deploy.Render(deploy.Options{Namespace: fluxNS, Watch: []string{watched, unwatched}, GitURL: stack.GitURL, Image: "fluxd:test"})
	if err != nil {
		t.Fatal(err)
	}
	var objs []unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(out)), 4096)
	for {
		var o unstructured.Unstructured
		if dec.Decode(&o.Object) != nil {
			break
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
	for _, ns := range []string{watched, unwatched, readonly} {
		if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	}
	applyObjects(t, kubectl, env, objs, func(o unstructured.Unstructured) bool {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "Role", "RoleBinding":
			return true
		}
		return false
	})
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), fluxNS, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), "fluxd-workloads", metav1.DeleteOptions{})
	})
	// nsw-c: read, not patch.
	read := []string{"get", "list", "watch"}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "nsw-read", Namespace: readonly}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "daemonsets", "replicasets"}, Verbs: read},
		{APIGroups: []string{"batch"}, Resources: []string{"cronjobs", "jobs"}, Verbs: read},
		{APIGroups: []string{"helm.toolkit.fluxcd.io", "helm.fluxcd.io"}, Resources: []string{"helmreleases"}, Verbs: read},
		{APIGroups: []string{""}, Resources: []string{"pods", "events", "serviceaccounts"}, Verbs: read},
	}}
	if _, err := admin.RbacV1().Roles(readonly).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nsw-read", Namespace: readonly},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "nsw-read"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "fluxd", Namespace: fluxNS}}}
	if _, err := admin.RbacV1().RoleBindings(readonly).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(fluxNS).CreateToken(ctx, "fluxd",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	localstack.NoteSecret("the token of the install's ServiceAccount", tr.Status.Token)
	kubeconfig := writeTokenKubeconfig(t, filepath.Join(stack.Dir, "pki", "ca.crt"), tr.Status.Token)

	// One Deployment "web" in each, in git and in the cluster.
	const gitDir, name = "nsw", "nswapp"
	img := stack.Registry + "/" + name + ":"
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0"} {
		if err := stack.PushImage(ctx, name, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	manifest := func(ns, tag string, automated bool) string {
		m := strings.Replace(rollingManifest("web", img+tag, 1, 0), "namespace: default", "namespace: "+ns, 1)
		if automated {
			m = strings.Replace(m, "  name: web\n", "  name: web\n  annotations: {fluxd.io/automated: \"true\"}\n", 1)
		}
		return m
	}
	files := map[string]string{}
	for _, ns := range []string{watched, unwatched, readonly} {
		files[gitDir+"/"+ns+".yaml"] = manifest(ns, "1.0.0", false)
		kubectlApply(t, files[gitDir+"/"+ns+".yaml"])
	}
	pushManifest(t, "Add web in three namespaces", files)
	image := func(ns string) string {
		d, err := admin.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return d.Spec.Template.Spec.Containers[0].Image
	}
	gitImage := func(ns string) string {
		clone := filepath.Join(t.TempDir(), "clone")
		gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
		b, err := os.ReadFile(filepath.Join(clone, gitDir, ns+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "image:") {
				return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "image:"))
			}
		}
		return ""
	}

	f := startFaultFluxd(t, "fluxd-nsw", gitDir, nil, "--kubeconfig="+kubeconfig, "--namespaces="+watched+","+readonly,
		"--automation-short-wait=1s", "--automation-long-wait=2s", "--git-poll-interval=2s", "--log-level=debug")
	flux := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=nsw"}
	svc := func(ns string) string { return ns + ":deployment/web" }

	t.Run("list-services marks them", func(t *testing.T) {
		var services []struct {
			ID       string
			Status   string
			Warnings []string
		}
		out, stderr, code := fluxctl(t, flux, "list-services", "-o", "json")
		if code != 0 || json.Unmarshal([]byte(out), &services) != nil {
			t.Fatalf("list-services: exit %d\n%s%s", code, out, stderr)
		}
		got := map[string]string{}
		for _, s := range services {
			got[s.ID] = s.Status + " | " + strings.Join(s.Warnings, "; ")
		}
		if g := got[svc(unwatched)]; !strings.HasPrefix(g, "not watched | not watched: ") {
			t.Errorf("%s: %q; want status 'not watched' and a warning saying why", svc(unwatched), g)
		}
		if g := got[svc(readonly)]; !strings.Contains(g, "not permitted: fluxd may not apply the workload: ServiceAccount "+fluxNS+"/fluxd may not patch deployments.apps in namespace "+readonly) {
			t.Errorf("%s: %q; want a warning that fluxd may not patch it", svc(readonly), g)
		}
		if g := got[svc(watched)]; strings.Contains(g, "not ") {
			t.Errorf("%s: %q; want it releasable", svc(watched), g)
		}
		table, _, _ := fluxctl(t, flux, "list-services")
		t.Logf("list-services:\n%s", table)
	})

	t.Run("a release of one is refused before the push", func(t *testing.T) {
		for _, tc := range []struct{ ns, want string }{
			{unwatched, "--watch-namespace " + watched + " --watch-namespace " + readonly + " --watch-namespace " + unwatched},
			{readonly, "kubectl -n " + readonly + " create rolebinding fluxd-workloads-" + fluxNS + " --clusterrole=fluxd-workloads --serviceaccount=" + fluxNS + ":fluxd"},
		} {
			head := remoteHead(t)
			out, stderr, code := fluxctl(t, flux, "release", "-y", "-s", svc(tc.ns), "-i", img+"1.1.0")
			if code == 0 || !strings.Contains(stderr, "namespace "+tc.ns) || !strings.Contains(stderr, tc.want) {
				t.Errorf("release of %s: exit %d; want it refused naming the namespace and %q\n%s%s", svc(tc.ns), code, tc.want, out, stderr)
			}
			if remoteHead(t) != head {
				t.Errorf("release of %s pushed a commit", svc(tc.ns))
			}
			t.Logf("release of %s:\n%s", svc(tc.ns), stderr)
		}
	})

	t.Run("release --all leaves them alone", func(t *testing.T) {
		out, stderr, code := fluxctl(t, flux, "release", "-y", "--all", "-i", img+"1.1.0")
		if code != 0 {
			t.Fatalf("release --all: exit %d\n%s%s\nlog: %s", code, out, stderr, stack.Log("fluxd-nsw"))
		}
		t.Logf("release --all:\n%s", out)
		if err := poll(ctx, 60*time.Second, func() error {
			if got := image(watched); got != img+"1.1.0" {
				return fmt.Errorf("%s runs %s", svc(watched), got)
			}
			return nil
		}); err != nil {
			t.Error(err)
		}
		for _, ns := range []string{unwatched, readonly} {
			if got, want := image(ns), img+"1.0.0"; got != want {
				t.Errorf("%s runs %s, want %s: released although fluxd does not watch it or may not patch it", svc(ns), got, want)
			}
			if got, want := gitImage(ns), img+"1.0.0"; got != want {
				t.Errorf("git has %s at %s, want %s", svc(ns), got, want)
			}
		}
	})

	t.Run("the automator leaves them alone", func(t *testing.T) {
		pushManifest(t, "Automate web in three namespaces", map[string]string{
			gitDir + "/" + watched + ".yaml":   manifest(watched, "1.1.0", true),
			gitDir + "/" + unwatched + ".yaml": manifest(unwatched, "1.0.0", true),
			gitDir + "/" + readonly + ".yaml":  manifest(readonly, "1.0.0", true),
		})
		if err := stack.PushImage(ctx, name, "1.2.0", t0.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := fluxctl(t, flux, "notify", img+"1.2.0"); code != 0 {
			t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
		}
		if err := poll(ctx, 60*time.Second, func() error {
			if got := image(watched); got != img+"1.2.0" {
				return fmt.Errorf("%s runs %s", svc(watched), got)
			}
			return nil
		}); err != nil {
			t.Fatalf("%v\nlog: %s", err, stack.Log("fluxd-nsw"))
		}
		time.Sleep(5 * time.Second) // passes of the automator (long wait 2s)
		for _, ns := range []string{unwatched, readonly} {
			if got, want := image(ns), img+"1.0.0"; got != want {
				t.Errorf("%s runs %s, want %s: automated although fluxd does not watch it or may not patch it", svc(ns), got, want)
			}
			if got, want := gitImage(ns), img+"1.0.0"; got != want {
				t.Errorf("git has %s at %s, want %s", svc(ns), got, want)
			}
		}
		out, _, _ := fluxctl(t, flux, "list-services", "-o", "json")
		if !strings.Contains(out, "refused: not permitted") {
			t.Errorf("list-services shows no automator decision refusing %s:\n%s", svc(readonly), out)
		}
		log, _ := os.ReadFile(stack.Log("fluxd-nsw"))
		if n := strings.Count(string(log), "decision: fluxd will not release it"); n > 2 {
			t.Errorf("the automator logged its refusal %d times in a few passes; want it remembered", n)
		}
	})
}
