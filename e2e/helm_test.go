package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fluxd/fluxd/internal/localstack"
)

// The chart as 'helm template' renders it, with fluxd's Namespace, an
// SSH remote and a watched namespace of its own, passes a server-side dry
// run under restricted Pod Security, as fluxctl install's output does
// (TestFluxctlInstallIsAccepted).
func TestHelmTemplateIsAccepted(t *testing.T) {
	ctx := testContext(t)
	kc := kubeClient(t)
	const ns, watched = "fluxd-helm-dry", "fluxd-helm-dry-apps"
	t.Cleanup(func() {
		for _, n := range []string{ns, watched} {
			_ = kc.CoreV1().Namespaces().Delete(context.Background(), n, metav1.DeleteOptions{})
		}
	})
	ch := fluxdChart(t)
	inst := action.NewInstall(&action.Configuration{})
	inst.DryRun, inst.ClientOnly, inst.Replace = true, true, true
	inst.ReleaseName, inst.Namespace = "fluxd", ns
	rel, err := inst.RunWithContext(ctx, ch, map[string]any{
		"image":           stack.Registry + "/fluxd:test",
		"git":             map[string]any{"url": "ssh://git@git.example/org/manifests.git", "paths": []any{"clusters/a"}},
		"watchNamespaces": []any{watched},
		"createNamespace": true,
	})
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	// Namespaces exist before a server-side dry run of what goes in them.
	var nsDoc string
	for _, doc := range strings.Split(rel.Manifest, "\n---\n") {
		if strings.Contains(doc, "\nkind: Namespace\n") {
			nsDoc = doc
		}
	}
	if !strings.Contains(nsDoc, "pod-security.kubernetes.io/enforce: restricted") {
		t.Fatalf("no restricted Namespace %s in the chart's output:\n%s", ns, rel.Manifest)
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
	o, e, c := run(t, env, kubectl, "apply", "--dry-run=server", "-f", write("chart.yaml", rel.Manifest))
	if c != 0 {
		t.Fatalf("kubectl apply --dry-run=server of the chart: exit %d\n%s%s", c, o, e)
	}
	if strings.Contains(e, "PodSecurity") {
		t.Errorf("the chart warns about Pod Security:\n%s", e)
	}
	for _, want := range []string{"deployment.apps/fluxd created (server dry run)", "rolebinding.rbac.authorization.k8s.io/fluxd-workloads-" + ns + " created (server dry run)",
		"secret/fluxd-git created (server dry run)", "secret/fluxd-ssh created (server dry run)"} {
		if !strings.Contains(o, want) {
			t.Errorf("the dry run lacks %q:\n%s", want, o)
		}
	}
}

// helmNS is the namespace of the Helm-installed fluxd, apart from
// TestFluxdInAPod's and docs/install.md's (TestHelmGuide).
const helmNS = "fluxd-helm-pod"

// 'helm install' of the chart on the real node gives a Ready fluxd pod
// from fluxd's own image, which fluxctl reaches through 'kubectl
// port-forward'; 'helm upgrade' with a changed value rolls a new pod that
// keeps the deploy key in fluxd-ssh byte for byte (the git host knows no
// other: the new pod is Ready only if it clones with it); 'helm
// uninstall' leaves the key, and installing again reuses it.
func TestHelmInstall(t *testing.T) {
	kc := requireRealNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	image, err := stack.BuildFluxdImage(ctx, t.TempDir(), "e2e-helm-1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := helmConfig(t, helmNS)
	ch := fluxdChart(t)
	var in localstack.FluxdPodInstall
	values := func(extraArgs ...any) map[string]any {
		return map[string]any{
			"image":     in.Image,
			"git":       map[string]any{"url": in.GitURL, "branch": in.GitBranch, "paths": []any{in.GitPath}},
			"extraArgs": extraArgs,
			// Its own: other installs on the stack have fluxd-workloads.
			"clusterRoleName": "fluxd-workloads-" + helmNS,
		}
	}
	install := func(ctx context.Context) (*release.Release, error) {
		inst := action.NewInstall(cfg)
		inst.ReleaseName, inst.Namespace = "fluxd", helmNS
		inst.PostRenderer = stackPatch(in.Patch)
		inst.Timeout = time.Minute
		return inst.RunWithContext(ctx, ch, values())
	}
	fp, err := stack.InstallFluxdPod(ctx, localstack.FluxdPodOptions{Fluxctl: filepath.Join(binDir, "fluxctl"), Image: image, Namespace: helmNS,
		Install: func(ctx context.Context, i localstack.FluxdPodInstall) error {
			in = i
			_, err := install(ctx)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	admin := []string{"FLUX_URL=" + fp.Addr, "FLUX_TOKEN=" + fp.Tokens["admin"]}
	kubectlBin := filepath.Join(stackBinDir(t), "kubectl")

	t.Run("a Ready pod from fluxd's image, Helm's release", func(t *testing.T) {
		rel, err := action.NewStatus(cfg).Run("fluxd")
		if err != nil || rel.Info.Status != release.StatusDeployed || rel.Version != 1 {
			t.Fatalf("helm status fluxd: %v, %+v", err, rel)
		}
		pod := readyPod(ctx, t, kc, "")
		if got := pod.Spec.Containers[0].Image; got != image {
			t.Errorf("the pod runs %s, want fluxd's image %s", got, image)
		}
		d, err := kc.AppsV1().Deployments(helmNS).Get(ctx, "fluxd", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Annotations["meta.helm.sh/release-name"] != "fluxd" || d.Labels["app.kubernetes.io/managed-by"] != "Helm" {
			t.Errorf("the Deployment is not Helm's: annotations %v, labels %v", d.Annotations, d.Labels)
		}
	})

	t.Run("fluxctl through kubectl port-forward", func(t *testing.T) {
		local := portForward(t, kubectlBin, fp.Addr)
		out, stderr, code := fluxctl(t, []string{"FLUX_URL=" + local, "FLUX_TOKEN=" + fp.Tokens["admin"]}, "identity")
		if code != 0 || strings.TrimSpace(out) != fp.Identity {
			t.Errorf("fluxctl identity through port-forward: exit %d %q%s; want %q", code, out, stderr, fp.Identity)
		}
		out, stderr, code = fluxctl(t, []string{"FLUX_URL=" + local, "FLUX_TOKEN=" + fp.Tokens["viewer"]}, "list-services")
		if code != 0 || !strings.Contains(out, "default:deployment/worker") {
			t.Errorf("fluxctl list-services through port-forward: exit %d\n%s%s", code, out, stderr)
		}
	})

	key := deployKey(ctx, t, kc)

	t.Run("helm upgrade keeps the deploy key", func(t *testing.T) {
		old := readyPod(ctx, t, kc, "").Name
		up := action.NewUpgrade(cfg)
		up.Namespace = helmNS
		up.PostRenderer = stackPatch(in.Patch)
		rel, err := up.RunWithContext(ctx, "fluxd", ch, values("--git-user=helm-upgraded"))
		if err != nil {
			t.Fatalf("helm upgrade: %v", err)
		}
		if rel.Version != 2 {
			t.Errorf("helm upgrade made revision %d, want 2", rel.Version)
		}
		pod := readyPod(ctx, t, kc, old)
		if !slices.Contains(pod.Spec.Containers[0].Args, "--git-user=helm-upgraded") {
			t.Errorf("the new pod %s runs without the upgraded value: args %v", pod.Name, pod.Spec.Containers[0].Args)
		}
		if got := deployKey(ctx, t, kc); !bytes.Equal(got, key) {
			t.Errorf("helm upgrade changed the deploy key in fluxd-ssh (%d bytes, was %d)", len(got), len(key))
		}
		out, stderr, code := fluxctl(t, admin, "identity")
		if code != 0 || strings.TrimSpace(out) != fp.Identity {
			t.Errorf("fluxctl identity after the upgrade: exit %d %q%s; want %q", code, out, stderr, fp.Identity)
		}
	})

	t.Run("helm uninstall keeps the deploy key, a new install reuses it", func(t *testing.T) {
		old := readyPod(ctx, t, kc, "").Name
		un := action.NewUninstall(cfg)
		un.Wait, un.Timeout = true, time.Minute
		res, err := un.Run("fluxd")
		if err != nil {
			t.Fatalf("helm uninstall: %v", err)
		}
		if !strings.Contains(res.Info, "fluxd-ssh") {
			t.Errorf("helm uninstall does not say it kept fluxd-ssh: %q", res.Info)
		}
		if _, err := kc.AppsV1().Deployments(helmNS).Get(ctx, "fluxd", metav1.GetOptions{}); err == nil {
			t.Error("the Deployment outlived helm uninstall")
		}
		if got := deployKey(ctx, t, kc); !bytes.Equal(got, key) {
			t.Fatalf("helm uninstall changed the deploy key in fluxd-ssh (%d bytes, was %d)", len(got), len(key))
		}
		if _, err := install(ctx); err != nil {
			t.Fatalf("helm install again: %v", err)
		}
		readyPod(ctx, t, kc, old)
		if got := deployKey(ctx, t, kc); !bytes.Equal(got, key) {
			t.Errorf("installing again changed the deploy key in fluxd-ssh")
		}
	})
}

func fluxdChart(t *testing.T) *chart.Chart {
	t.Helper()
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.Load(filepath.Join(root, "deploy", "chart", "fluxd"))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// helmConfig is what the helm CLI sets up for a namespace of the stack:
// releases kept in Secrets.
func helmConfig(t *testing.T, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &stack.Kubeconfig, &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// stackPatch is a Helm post-renderer (helm --post-renderer) that makes the
// chart's objects run on the stack as 'fluxctl install”s are.
type stackPatch func([]*unstructured.Unstructured) error

func (p stackPatch) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(in, 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, &obj)
		}
	}
	if err := p(objs); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, obj := range objs {
		b, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return &out, nil
}

// readyPod waits for a Ready fluxd pod in helmNS other than not, and
// for not to be gone.
func readyPod(ctx context.Context, t *testing.T, kc *kubernetes.Clientset, not string) *corev1.Pod {
	t.Helper()
	var ready *corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := kc.CoreV1().Pods(helmNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=fluxd"})
		if err != nil {
			return false, err
		}
		ready, last = nil, ""
		for i, p := range pods.Items {
			last += fmt.Sprintf("%s %s; ", p.Name, p.Status.Phase)
			if p.Name == not {
				return false, nil
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready = &pods.Items[i]
				}
			}
		}
		return ready != nil, nil
	})
	if wait.Interrupted(err) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		t.Fatalf("no Ready fluxd pod in %s (other than %q) within 2 minutes; pods: %s", helmNS, not, last)
	}
	if err != nil {
		t.Fatalf("waiting for a Ready fluxd pod in %s (not %q): %v; pods: %s", helmNS, not, err, last)
	}
	return ready
}

func deployKey(ctx context.Context, t *testing.T, kc *kubernetes.Clientset) []byte {
	t.Helper()
	s, err := kc.CoreV1().Secrets(helmNS).Get(ctx, "fluxd-ssh", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Data["identity"]) == 0 {
		t.Fatalf("fluxd-ssh holds no key: %v", keysOf(s.Data))
	}
	return s.Data["identity"]
}

// portForward runs 'kubectl port-forward deploy/fluxd' to the pod's API
// port (addr's) and returns the local address.
func portForward(t *testing.T, kubectl, addr string) string {
	t.Helper()
	local, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	_, lport, _ := net.SplitHostPort(local)
	_, rport, _ := net.SplitHostPort(addr)
	pf := exec.Command(kubectl, "-n", helmNS, "port-forward", "deploy/fluxd", lport+":"+rport)
	pf.Env = append(os.Environ(), "KUBECONFIG="+stack.Kubeconfig)
	stdout, _ := pf.StdoutPipe()
	pf.Stderr = pf.Stdout
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pf.Process.Kill(); _ = pf.Wait() })
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.Contains(sc.Text(), "Forwarding from") {
		t.Fatalf("kubectl port-forward: %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return local
}

// helmGuideMarker marks the blocks of docs/install.md's "Install with
// Helm" that TestHelmGuide runs.
const helmGuideMarker = "# tested: TestHelmGuide"

// docs/install.md's "Install with Helm" runs as written, with the helm
// CLI built from its module, from a checkout's root, on the stack.
func TestHelmGuide(t *testing.T) {
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	steps, _, err := guideSteps(filepath.Join(root, "docs", "install.md"), helmGuideMarker, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) < 8 {
		t.Fatalf("the Helm section has %d commands in its tested blocks; the parser or the guide is wrong", len(steps))
	}
	helm := helmCLI(t)
	kc := kubeClient(t)
	t.Cleanup(func() {
		_ = kc.CoreV1().Namespaces().Delete(context.Background(), "fluxd-helm", metav1.DeleteOptions{})
	})
	sh := newGuideShell(t, []string{
		"KUBECONFIG=" + stack.Kubeconfig,
		"PATH=" + filepath.Dir(helm) + ":" + binDir + ":" + stackBinDir(t) + ":" + os.Getenv("PATH"),
	})
	// "From its root": the checkout's deploy/ in the shell's directory.
	if out, code, err := sh.run(-1, "ln -s "+filepath.Join(root, "deploy")+" deploy", time.Minute); err != nil || code != 0 {
		t.Fatalf("linking the checkout's deploy/: exit %d %v\n%s", code, err, out)
	}
	runGuide(t, "install.md", steps, sh)
}

// helmCLI builds the helm CLI at the version of go.mod's Helm module,
// once, into a cache directory of its own, and returns its path.
func helmCLI(t *testing.T) string {
	t.Helper()
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "helm.sh/helm/v3")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -m helm.sh/helm/v3: %v", err)
	}
	version := strings.TrimSpace(string(out))
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "fluxd-helm", version)
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install helm.sh/helm/v3/cmd/helm@%s: %v\n%s", version, err, out)
	}
	return bin
}
