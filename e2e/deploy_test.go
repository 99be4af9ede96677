package e2e

// The install in deploy/ on the real stack: the apiserver accepts it
// under restricted Pod Security, and its RBAC is enough for fluxd's flows
// and no more. fluxd runs outside the cluster with a token of the
// install's ServiceAccount, so every request it makes is authorized as
// the install's pods would be.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"golang.org/x/crypto/ssh"

	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/platform/kube"
)

// The names deploy/ uses.
const (
	deployNamespace   = "fluxd"
	deployAccount     = "fluxd"
	deployLease       = "fluxd"
	deployWatched     = "default"
	deployPullSecret  = "regcred" // named in the Role fluxd-pull-secrets-fluxd
	deployOtherSecret = "not-granted"
	deployKeySecret   = "fluxd-ssh" // shipped empty, filled by fluxd
)

// secretKey is the private key the deploy key Secret holds.
func secretKey(t *testing.T, admin kubernetes.Interface) []byte {
	t.Helper()
	s, err := admin.CoreV1().Secrets(deployNamespace).Get(context.Background(), deployKeySecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Data[kube.DeployKeyField]
	if len(k) == 0 {
		t.Fatalf("the Secret %s/%s holds no key: %v", deployNamespace, deployKeySecret, s.Data)
	}
	return k
}

// secretPublicKey is the public half of the Secret's key, as 'fluxctl
// identity' prints it.
func secretPublicKey(t *testing.T, admin kubernetes.Interface) string {
	t.Helper()
	signer, err := ssh.ParsePrivateKey(secretKey(t, admin))
	if err != nil {
		t.Fatalf("the key in the Secret: %v", err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(signer.PublicKey()))) + " fluxd"
}

// closedAddr is a loopback address nothing listens at.
func closedAddr(t *testing.T) string {
	t.Helper()
	return freeAddr(t)
}

// knownHostsFile is a known_hosts file of one made-up host.
func knownHostsFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	pemKey, err := gogit.GenerateKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pemKey)
	if err != nil {
		t.Fatal(err)
	}
	line := "nothing.invalid " + string(ssh.MarshalAuthorizedKey(signer.PublicKey()))
	if err := os.WriteFile(p, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDeployManifests(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	admin := kubeClient(t)
	kubectl := filepath.Join(stackBinDir(t), "kubectl")
	env := []string{"KUBECONFIG=" + stack.Kubeconfig}
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "deploy")
	objs := renderDeploy(t, kubectl, dir)
	t.Cleanup(func() { deleteDeploy(admin, objs) })

	// 1. Restricted Pod Security is enforced in fluxd's namespace (a pod
	// without the restricted securityContext is refused there, and
	// admitted in the watched namespace, which has no such label), and
	// the whole install is accepted there.
	applyObjects(t, kubectl, env, objs, func(o unstructured.Unstructured) bool { return o.GetKind() == "Namespace" })
	plain := func(ns string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := admin.CoreV1().Pods(deployWatched).Create(ctx, plain(deployWatched), dryRun); err != nil {
		t.Fatalf("a plain pod in namespace %s: %v", deployWatched, err)
	}
	_, err = admin.CoreV1().Pods(deployNamespace).Create(ctx, plain(deployNamespace), dryRun)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `violates PodSecurity "restricted`) {
		t.Fatalf("a pod without the restricted securityContext in namespace %s: %v; want it refused by Pod Security admission", deployNamespace, err)
	}
	t.Logf("refused in %s: %v", deployNamespace, err)
	out, stderr, code := run(t, env, kubectl, "apply", "--dry-run=server", "-k", dir)
	if code != 0 {
		t.Fatalf("kubectl apply --dry-run=server -k deploy: exit %d\n%s%s", code, out, stderr)
	}
	if strings.Contains(stderr, "PodSecurity") {
		t.Errorf("kubectl apply --dry-run=server -k deploy warns about Pod Security:\n%s", stderr)
	}
	t.Logf("kubectl apply --dry-run=server -k deploy:\n%s", out)
	// The HA component, used as its comment says: from a kustomization
	// beside the checkout.
	haDir, err := os.MkdirTemp(root, ".e2e-ha-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(haDir) })
	if err := os.WriteFile(filepath.Join(haDir, "kustomization.yaml"), []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../deploy]\ncomponents: [../deploy/ha]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = run(t, env, kubectl, "apply", "--dry-run=server", "-o", "yaml", "-k", haDir)
	if code != 0 {
		t.Fatalf("kubectl apply --dry-run=server -k (deploy with deploy/ha): exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"replicas: 2", "- --leader-elect", "- --history-db=$(HISTORY_DB)", "secretName: fluxd-history-db"} {
		if !strings.Contains(out, want) {
			t.Errorf("deploy/ha as the server would store it lacks %q", want)
		}
	}
	// 2. The RBAC for real, and a token of the ServiceAccount.
	applyObjects(t, kubectl, env, objs, func(o unstructured.Unstructured) bool {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Secret":
			return true
		}
		return false
	})
	// Pod Security only warns on a Deployment; it enforces on its pods.
	// So a pod of the Deployment's template must be admitted too (now
	// that its ServiceAccount exists).
	var dep appsv1.Deployment
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			if err := runtimeFromUnstructured(o, &dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(dep.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("deploy/ has no Deployment")
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fluxd-template", Namespace: deployNamespace, Labels: dep.Spec.Template.Labels},
		Spec: dep.Spec.Template.Spec}
	if _, err := admin.CoreV1().Pods(deployNamespace).Create(ctx, pod, dryRun); err != nil {
		t.Fatalf("a pod of fluxd's template under restricted Pod Security: %v", err)
	}

	for _, name := range []string{deployPullSecret, deployOtherSecret} {
		auth := base64.StdEncoding.EncodeToString([]byte("fluxd:" + name))
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: deployWatched}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, stack.Registry, auth)}}
		if _, err := admin.CoreV1().Secrets(deployWatched).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = admin.CoreV1().Secrets(deployWatched).Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	tr, err := admin.CoreV1().ServiceAccounts(deployNamespace).CreateToken(ctx, deployAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", deployNamespace, deployAccount, err)
	}
	token := tr.Status.Token
	localstack.NoteSecret("the token of the install's ServiceAccount", token)
	caFile := filepath.Join(stack.Dir, "pki", "ca.crt")
	kubeconfig := writeTokenKubeconfig(t, caFile, token)
	sa := kubernetes.NewForConfigOrDie(&rest.Config{Host: stack.APIServer, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}})

	// fluxd as the ServiceAccount, on a service of its own whose pods name
	// a granted pull secret and one it may not read.
	const gitDir, name = "deploy-rbac", "rbacapp"
	img := stack.Registry + "/" + name + ":"
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0"} {
		if err := stack.PushImage(ctx, name, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	m := strings.Replace(rollingManifest(name, img+"1.0.0", 1, 0), "    spec:\n",
		fmt.Sprintf("    spec:\n      imagePullSecrets: [{name: %s}, {name: %s}]\n", deployPullSecret, deployOtherSecret), 1)
	pushManifest(t, "Add "+name, map[string]string{gitDir + "/" + name + ".yaml": m})
	kubectlApply(t, m)
	t.Cleanup(func() {
		_ = admin.AppsV1().Deployments(deployWatched).Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	waitRolledOut(t, admin, map[string][]string{name: {"app=" + img + "1.0.0"}})

	f := startFaultFluxd(t, "fluxd-deploy", gitDir, nil, "--kubeconfig="+kubeconfig, "--namespaces="+deployWatched,
		"--leader-elect", "--leader-elect-namespace="+deployNamespace, "--leader-elect-lease-name="+deployLease,
		"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
		"--automation-short-wait=1s", "--automation-long-wait=2s", "--git-poll-interval=2s")
	flux := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=rbac"}
	svc := deployWatched + ":deployment/" + name

	t.Run("leader election", func(t *testing.T) {
		// Held by this fluxd, and renewed: get, create and update.
		var first time.Time
		err := poll(ctx, 30*time.Second, func() error {
			l, err := admin.CoordinationV1().Leases(deployNamespace).Get(ctx, deployLease, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, f.Addr+"#") || l.Spec.RenewTime == nil {
				return fmt.Errorf("lease %s/%s held by %v, want %s", deployNamespace, deployLease, l.Spec.HolderIdentity, f.Addr)
			}
			if first.IsZero() {
				first = l.Spec.RenewTime.Time
			}
			if !l.Spec.RenewTime.After(first) {
				return fmt.Errorf("lease not renewed since %v", first)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%v (log: %s)", err, stack.Log("fluxd-deploy"))
		}
	})

	t.Run("list-services", func(t *testing.T) {
		out, stderr, code := fluxctl(t, flux, "list-services", "-o", "json")
		var services []struct{ ID string }
		if code != 0 || json.Unmarshal([]byte(out), &services) != nil {
			t.Fatalf("list-services: exit %d\n%s%s", code, out, stderr)
		}
		found := false
		for _, s := range services {
			found = found || s.ID == svc
			if !strings.HasPrefix(s.ID, deployWatched+":") {
				t.Errorf("list-services shows %s, outside the watched namespace", s.ID)
			}
		}
		if !found {
			t.Errorf("list-services does not show %s:\n%s", svc, out)
		}
		// The tags are read although a pull secret of the service may not
		// be read by fluxd.
		out, stderr, code = fluxctl(t, flux, "list-images", svc)
		if code != 0 || !strings.Contains(out, "1.1.0") {
			t.Errorf("list-images %s: exit %d\n%s%s", svc, code, out, stderr)
		}
	})

	t.Run("release", func(t *testing.T) {
		out, stderr, code := fluxctl(t, flux, "release", "-y", "-s", svc, "-i", img+"1.1.0")
		if code != 0 {
			t.Fatalf("release: exit %d\n%s%s\nfluxd log: %s", code, out, stderr, stack.Log("fluxd-deploy"))
		}
		waitRolledOut(t, admin, map[string][]string{name: {"app=" + img + "1.1.0"}})
	})

	t.Run("automate", func(t *testing.T) {
		if out, stderr, code := fluxctl(t, flux, "automate", svc); code != 0 {
			t.Fatalf("automate: exit %d\n%s%s", code, out, stderr)
		}
		if err := stack.PushImage(ctx, name, "1.2.0", t0.Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		if out, stderr, code := fluxctl(t, flux, "notify", img+"1.2.0"); code != 0 {
			t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
		}
		waitRolledOut(t, admin, map[string][]string{name: {"app=" + img + "1.2.0"}})
	})

	// The deploy key Secret the install ships empty: a fluxd given
	// --git-ssh-key-secret fills it, a second one reads the same key, and
	// both serve 'fluxctl identity' before their git remote answers (here
	// nothing listens at its address). Replicas racing to fill it end
	// with one key.
	t.Run("deploy key Secret", func(t *testing.T) {
		keyArgs := []string{"--kubeconfig=" + kubeconfig, "--namespaces=" + deployWatched,
			"--git-url=ssh://git@" + closedAddr(t) + "/manifests.git", "--git-ssh-known-hosts-file=" + knownHostsFile(t),
			"--git-ssh-key-secret=" + deployNamespace + "/" + deployKeySecret}
		identity := func(f *localstack.Fluxd) string {
			out, stderr, code := fluxctl(t, []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}, "identity")
			if code != 0 {
				t.Fatalf("fluxctl identity: exit %d\n%s%s", code, out, stderr)
			}
			return strings.TrimSpace(out)
		}
		a := startFaultFluxd(t, "fluxd-key-a", gitDir, nil, keyArgs...)
		stored := secretPublicKey(t, admin)
		if got := identity(a); got != stored || !strings.HasPrefix(got, "ssh-ed25519 ") {
			t.Errorf("the first fluxd's identity %q, the Secret's key %q: want the same ed25519 key", got, stored)
		}
		b := startFaultFluxd(t, "fluxd-key-b", gitDir, nil, keyArgs...)
		if got := identity(b); got != stored {
			t.Errorf("the second fluxd's identity %q, want the key already in the Secret %q", got, stored)
		}
		if secretPublicKey(t, admin) != stored {
			t.Error("the second fluxd replaced the key in the Secret")
		}
		_, stderr, code := fluxctl(t, []string{"FLUX_URL=" + b.Addr, "FLUX_TOKEN=" + b.Tokens["viewer"]}, "list-services")
		if code == 0 || !strings.Contains(stderr, "fluxd cannot read git yet") || !strings.Contains(stderr, "connection refused") {
			t.Errorf("list-services while the remote does not answer: exit %d, want it to say git cannot be read yet and why:\n%s", code, stderr)
		}

		// A Secret other than the one granted is refused with the Role to
		// check, and a missing one names the command to create it.
		cluster, err := kube.New(&rest.Config{Host: stack.APIServer, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}}, kube.Config{Namespaces: []string{deployWatched}})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = cluster.DeployKey(ctx, deployNamespace, "fluxd-tokens", gogit.GenerateKeyPEM)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Role fluxd-deploy-key") {
			t.Errorf("DeployKey of a Secret not granted: %v; want Forbidden, naming the Role to check", err)
		}
		adminRC, err := clientcmd.BuildConfigFromFlags("", stack.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		adminCluster, err := kube.New(adminRC, kube.Config{Namespaces: []string{deployWatched}})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = adminCluster.DeployKey(ctx, deployNamespace, "no-such-key", gogit.GenerateKeyPEM)
		if err == nil || !strings.Contains(err.Error(), "does not exist") || !strings.Contains(err.Error(), "kubectl -n "+deployNamespace+" create secret generic no-such-key") {
			t.Errorf("DeployKey of a missing Secret: %v; want it to say how to create it", err)
		}

		// Racing replicas, as the ServiceAccount: empty the Secret, then
		// let several fill it at once.
		s, err := admin.CoreV1().Secrets(deployNamespace).Get(ctx, deployKeySecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Data = nil
		delete(s.Annotations, kube.AnnotationDeployKeyHeld) // a new install
		if _, err := admin.CoreV1().Secrets(deployNamespace).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		const replicas = 6
		type result struct {
			key     string
			created bool
			err     error
		}
		results := make(chan result, replicas)
		start := make(chan struct{})
		for range replicas {
			go func() {
				<-start
				k, created, err := cluster.DeployKey(ctx, deployNamespace, deployKeySecret, gogit.GenerateKeyPEM)
				results <- result{string(k), created, err}
			}()
		}
		close(start)
		keys, creators := map[string]bool{}, 0
		for range replicas {
			r := <-results
			if r.err != nil {
				t.Fatalf("DeployKey as the ServiceAccount: %v", r.err)
			}
			keys[r.key] = true
			if r.created {
				creators++
			}
		}
		if len(keys) != 1 || creators != 1 {
			t.Errorf("%d replicas racing: %d keys, %d stored one; want one key, stored once", replicas, len(keys), creators)
		}
		for k := range keys {
			if k != string(secretKey(t, admin)) {
				t.Error("the key the replicas use is not the Secret's")
			}
		}

		// A key brought with the recipe deploy/deploykey.yaml once gave
		// (create --dry-run | apply) leaves last-applied data, so that the
		// next apply of the install empties the Secret. fluxd, which has
		// read the key and marked the Secret, then refuses to make a new
		// one silently and says how to restore it.
		ownKey, err := gogit.GenerateKeyPEM()
		if err != nil {
			t.Fatal(err)
		}
		keyFile := filepath.Join(t.TempDir(), "identity")
		if err := os.WriteFile(keyFile, ownKey, 0o600); err != nil {
			t.Fatal(err)
		}
		sh := func(script string) string {
			t.Helper()
			out, stderr, code := run(t, append(env, "PATH="+stackBinDir(t)+":"+os.Getenv("PATH")), "/bin/sh", "-c", script)
			if code != 0 {
				t.Fatalf("%s: exit %d\n%s%s", script, code, out, stderr)
			}
			return out
		}
		sh("kubectl -n " + deployNamespace + " create secret generic " + deployKeySecret + " --from-file=identity=" + keyFile + " --dry-run=client -o yaml | kubectl apply -f -")
		if k, _, err := cluster.DeployKey(ctx, deployNamespace, deployKeySecret, gogit.GenerateKeyPEM); err != nil || string(k) != string(ownKey) {
			t.Fatalf("DeployKey after the key was brought: %v; want the key brought", err)
		}
		sh("kubectl apply -f " + filepath.Join(dir, "deploykey.yaml"))
		_, created, err := cluster.DeployKey(ctx, deployNamespace, deployKeySecret, gogit.GenerateKeyPEM)
		if err == nil || created || !strings.Contains(err.Error(), "held a key") || !strings.Contains(err.Error(), "patch secret "+deployKeySecret) {
			t.Fatalf("DeployKey of a Secret whose key an apply removed: created %v, %v; want a refusal saying how to restore it", created, err)
		}
		t.Logf("a lost key: %v", err)
		// Restored with the patch the error and the install guide give, the
		// key survives the next apply of the install.
		sh("kubectl -n " + deployNamespace + " patch secret " + deployKeySecret + " --type merge -p \"{\\\"data\\\":{\\\"identity\\\":\\\"$(base64 -w0 " + keyFile + ")\\\"}}\"")
		sh("kubectl apply -f " + filepath.Join(dir, "deploykey.yaml"))
		if k, created, err := cluster.DeployKey(ctx, deployNamespace, deployKeySecret, gogit.GenerateKeyPEM); err != nil || created || string(k) != string(ownKey) {
			t.Fatalf("DeployKey after a patch and an apply of the install: created %v, %v; want the key patched in", created, err)
		}

		// A kubernetes.io/ssh-auth Secret's ssh-privatekey is read too; a
		// Secret holding other fields only is refused, naming the field.
		for _, tc := range []struct {
			name    string
			typ     corev1.SecretType
			data    map[string][]byte
			wantErr string
		}{
			{"ssh-auth", corev1.SecretTypeSSHAuth, map[string][]byte{corev1.SSHAuthPrivateKey: ownKey}, ""},
			{"other-field", corev1.SecretTypeOpaque, map[string][]byte{"id_ed25519": ownKey}, `holds id_ed25519 but no "identity"`},
		} {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key-" + tc.name, Namespace: deployNamespace}, Type: tc.typ, Data: tc.data}
			if _, err := admin.CoreV1().Secrets(deployNamespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			k, created, err := adminCluster.DeployKey(ctx, deployNamespace, sec.Name, gogit.GenerateKeyPEM)
			if tc.wantErr == "" && (err != nil || created || string(k) != string(ownKey)) {
				t.Errorf("%s: created %v, %v; want the key in it", tc.name, created, err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("%s: %v; want an error containing %q", tc.name, err, tc.wantErr)
			}
		}
	})

	// 3. What the ServiceAccount may not do (and the rest of what it may).
	t.Run("forbidden", func(t *testing.T) {
		// What the flows above did not need but fluxd does: Diagnose lists a
		// failing rollout's pods; pull secrets come from service accounts
		// and the Secrets the Role names.
		if _, err := sa.CoreV1().Pods(deployWatched).List(ctx, metav1.ListOptions{}); err != nil {
			t.Errorf("list pods in %s: %v", deployWatched, err)
		}
		if _, err := sa.CoreV1().ServiceAccounts(deployWatched).Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Errorf("get service account %s/default: %v", deployWatched, err)
		}
		if _, err := sa.CoreV1().Secrets(deployWatched).Get(ctx, deployPullSecret, metav1.GetOptions{}); err != nil {
			t.Errorf("get the granted pull secret %s: %v", deployPullSecret, err)
		}
		cases := []struct {
			what string
			call func() error
		}{
			{"get a Secret not named in its Role", func() error {
				_, err := sa.CoreV1().Secrets(deployWatched).Get(ctx, deployOtherSecret, metav1.GetOptions{})
				return err
			}},
			{"list Secrets", func() error {
				_, err := sa.CoreV1().Secrets(deployWatched).List(ctx, metav1.ListOptions{})
				return err
			}},
			{"get a Secret in its own namespace", func() error {
				_, err := sa.CoreV1().Secrets(deployNamespace).Get(ctx, "fluxd-tokens", metav1.GetOptions{})
				return err
			}},
			{"list Secrets in its own namespace", func() error {
				_, err := sa.CoreV1().Secrets(deployNamespace).List(ctx, metav1.ListOptions{})
				return err
			}},
			{"create a Secret in its own namespace", func() error {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fluxd-extra", Namespace: deployNamespace}}
				_, err := sa.CoreV1().Secrets(deployNamespace).Create(ctx, s, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}},
			{"update a Secret in its own namespace other than the deploy key", func() error {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fluxd-tokens", Namespace: deployNamespace}}
				_, err := sa.CoreV1().Secrets(deployNamespace).Update(ctx, s, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}},
			{"delete the deploy key Secret", func() error {
				return sa.CoreV1().Secrets(deployNamespace).Delete(ctx, deployKeySecret, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			}},
			{"get a Secret named like the deploy key in a watched namespace", func() error {
				_, err := sa.CoreV1().Secrets(deployWatched).Get(ctx, deployKeySecret, metav1.GetOptions{})
				return err
			}},
			{"delete a watched Deployment", func() error {
				return sa.AppsV1().Deployments(deployWatched).Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			}},
			{"create a Deployment", func() error {
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "intruder", Namespace: deployWatched}}
				_, err := sa.AppsV1().Deployments(deployWatched).Create(ctx, d, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				return err
			}},
			{"list Deployments of a namespace it does not watch", func() error {
				_, err := sa.AppsV1().Deployments("kube-system").List(ctx, metav1.ListOptions{})
				return err
			}},
			{"list Deployments of every namespace", func() error {
				_, err := sa.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
				return err
			}},
			{"get another Lease", func() error {
				_, err := sa.CoordinationV1().Leases(deployNamespace).Get(ctx, "someone-else", metav1.GetOptions{})
				return err
			}},
			{"list Nodes", func() error {
				_, err := sa.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
				return err
			}},
		}
		for _, c := range cases {
			if err := c.call(); !apierrors.IsForbidden(err) {
				t.Errorf("%s: %v; want Forbidden", c.what, err)
			}
		}
	})
}

// renderDeploy builds deploy/ with the stack's kubectl (kustomize is built
// in) and returns its objects.
func renderDeploy(t *testing.T, kubectl, dir string) []unstructured.Unstructured {
	t.Helper()
	out, stderr, code := run(t, nil, kubectl, "kustomize", dir)
	if code != 0 {
		t.Fatalf("kubectl kustomize %s: exit %d\n%s", dir, code, stderr)
	}
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	var objs []unstructured.Unstructured
	for {
		var o unstructured.Unstructured
		err := dec.Decode(&o.Object)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading kubectl kustomize's output: %v", err)
		}
		if len(o.Object) > 0 {
			objs = append(objs, o)
		}
	}
	return objs
}

// applyObjects applies the objects keep chooses, for real, with kubectl.
func applyObjects(t *testing.T, kubectl string, env []string, objs []unstructured.Unstructured, keep func(unstructured.Unstructured) bool) {
	t.Helper()
	list := map[string]any{"apiVersion": "v1", "kind": "List"}
	var items []any
	for _, o := range objs {
		if keep(o) {
			items = append(items, o.Object)
		}
	}
	list["items"] = items
	b, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "objects.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := run(t, env, kubectl, "apply", "-f", file); code != 0 {
		t.Fatalf("kubectl apply: exit %d\n%s%s", code, out, stderr)
	}
}

// deleteDeploy deletes what applyObjects created: the cluster-scoped
// objects, the namespaced ones outside fluxd's namespace, then that
// namespace with the rest.
func deleteDeploy(admin kubernetes.Interface, objs []unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, o := range objs {
		ns, n := o.GetNamespace(), o.GetName()
		switch o.GetKind() {
		case "ClusterRole":
			_ = admin.RbacV1().ClusterRoles().Delete(ctx, n, metav1.DeleteOptions{})
		case "ClusterRoleBinding":
			_ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, n, metav1.DeleteOptions{})
		case "Role":
			_ = admin.RbacV1().Roles(ns).Delete(ctx, n, metav1.DeleteOptions{})
		case "RoleBinding":
			_ = admin.RbacV1().RoleBindings(ns).Delete(ctx, n, metav1.DeleteOptions{})
		}
	}
	_ = admin.CoreV1().Namespaces().Delete(ctx, deployNamespace, metav1.DeleteOptions{})
}

// writeTokenKubeconfig writes a kubeconfig that authenticates with token.
func writeTokenKubeconfig(t *testing.T, caFile, token string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: stack
  cluster: {server: %q, certificate-authority: %q}
users:
- name: fluxd
  user: {token: %q}
contexts:
- name: fluxd
  context: {cluster: stack, user: fluxd}
current-context: fluxd
`, stack.APIServer, caFile, token)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func runtimeFromUnstructured(o unstructured.Unstructured, into any) error {
	b, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
