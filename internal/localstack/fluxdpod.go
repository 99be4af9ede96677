package localstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxd/fluxd/internal/auth"
)

// fluxd in a pod on the real node, installed as a user installs it: the
// manifests 'fluxctl install' renders from deploy/, the image 'make image'
// builds, git over SSH with the deploy key fluxd generates into the Secret
// fluxd-ssh. What the stack changes, and why (podPatch):
//   - the pod uses the host's network: the stack has no kube-proxy, so
//     neither the Service's ClusterIP nor a NodePort routes, and every
//     component (API server, registry, sshd) listens on loopback. fluxd's
//     listeners are on loopback ports of their own, and KUBERNETES_SERVICE_*
//     name the API server there;
//   - it tolerates and selects the real node;
//   - its state volume is a directory of the stack's (a hostPath), so that
//     a restarted pod takes over what the last one left, as it does with
//     the PersistentVolumeClaim deploy/deployment.yaml recommends;
//   - its Namespace enforces the "privileged" Pod Security level (the host's
//     network and a hostPath are not "restricted"); it still warns and
//     audits "restricted", and TestDeployManifests proves the unpatched
//     install passes "restricted".

// FluxdPodOptions configure InstallFluxdPod.
type FluxdPodOptions struct {
	// Fluxctl is the fluxctl binary that renders the install. Required.
	Fluxctl string
	// Image is fluxd's image, in the stack's registry. Required.
	Image string
	// Namespace is fluxd's own; default "fluxd".
	Namespace string
	// Instance names the tokens' instance; default "demo".
	Instance string
	// Args are added to fluxd's.
	Args []string
	// Install, when set, installs fluxd instead of 'fluxctl install' and
	// an apply (the Helm chart's tests install with Helm). The namespace,
	// the Secret fluxd-tokens and the ConfigMap fluxd-known-hosts exist
	// when it is called.
	Install func(ctx context.Context, in FluxdPodInstall) error
}

// FluxdPodInstall is what an installer of fluxd's pod is given.
type FluxdPodInstall struct {
	Namespace string
	// GitURL is the stack's SSH remote; GitBranch and GitPath its branch
	// and the manifests' path in it.
	GitURL, GitBranch, GitPath string
	// Image is fluxd's image.
	Image string
	// Patch makes an install's objects run on the stack, as they are for
	// 'fluxctl install' (see the top of this file): the installer calls it
	// on what it renders, every time it renders (a Helm post-renderer).
	Patch func(objs []*unstructured.Unstructured) error
}

// FluxdPod is fluxd running in the cluster.
type FluxdPod struct {
	Namespace string
	// Addr is its API's host:port: the pod's own listener, on loopback.
	Addr string
	// WebAddr, MetricsAddr, WebhookAddr and HealthAddr are its other
	// listeners.
	WebAddr, MetricsAddr, WebhookAddr, HealthAddr string
	// Tokens maps a role name to a token.
	Tokens map[string]string
	// WebhookSecret is the registries' shared secret.
	WebhookSecret string
	// GitURL is the ssh:// remote it releases through.
	GitURL string
	// Identity is its deploy key's public half, as 'fluxctl identity'
	// prints it, authorized by the stack's sshd.
	Identity string
}

// InstallFluxdPod installs fluxd into the cluster on the real node and
// waits until its pod is Ready.
func (s *Stack) InstallFluxdPod(ctx context.Context, o FluxdPodOptions) (*FluxdPod, error) {
	if !s.HasRealNode() {
		return nil, errors.New("fluxd in a pod needs the real node (the stack was started without it)")
	}
	if o.Fluxctl == "" || o.Image == "" {
		return nil, errors.New("InstallFluxdPod: Fluxctl and Image are required")
	}
	if o.Namespace == "" {
		o.Namespace = "fluxd"
	}
	if o.Instance == "" {
		o.Instance = "demo"
	}
	gs, err := s.StartGitSSH(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the SSH git remote: %w", err)
	}
	fp := &FluxdPod{Namespace: o.Namespace, GitURL: gs.GitURL, Tokens: map[string]string{}}
	// The Secrets and the ConfigMap a user creates by hand (docs/install.md).
	// Files of their own per namespace: two installs share no state.
	suffix := ""
	if o.Namespace != "fluxd" {
		suffix = "-" + o.Namespace
	}
	tokensFile := filepath.Join(s.Dir, "fluxd-pod-tokens"+suffix)
	_ = os.Remove(tokensFile)
	for _, role := range []auth.Role{auth.Admin, auth.Deployer, auth.Viewer} {
		tok, err := auth.Create(tokensFile, auth.Identity{Instance: o.Instance, Role: role})
		if err != nil {
			return nil, err
		}
		fp.Tokens[role.String()] = tok
		NoteSecret("the "+role.String()+" token of fluxd's pod", tok)
	}
	tokens, err := os.ReadFile(tokensFile)
	if err != nil {
		return nil, err
	}
	if fp.WebhookSecret, err = randomHex(24); err != nil {
		return nil, err
	}
	NoteSecret("the webhook secret of fluxd's pod", fp.WebhookSecret)
	knownHosts, err := os.ReadFile(gs.KnownHostsFile())
	if err != nil {
		return nil, err
	}
	prereqs := []*unstructured.Unstructured{
		object("v1", "Secret", o.Namespace, "fluxd-tokens", map[string]any{
			"type": "Opaque", "stringData": map[string]any{"tokens": string(tokens), "webhook-secret": fp.WebhookSecret}}),
		object("v1", "ConfigMap", o.Namespace, "fluxd-known-hosts", map[string]any{
			"data": map[string]any{"known_hosts": string(knownHosts)}})}
	state := filepath.Join(s.Dir, "fluxd-pod-state"+suffix)
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chown(state, 65532, 65532); err != nil {
		return nil, err
	}
	patch := func(objs []*unstructured.Unstructured) error {
		var deployment *unstructured.Unstructured
		for _, obj := range objs {
			if obj.GetKind() == "Deployment" && obj.GetName() == "fluxd" {
				deployment = obj
			}
			if obj.GetKind() == "Namespace" && obj.GetName() == o.Namespace {
				privileged(obj)
			}
		}
		if deployment == nil {
			return errors.New("the install has no Deployment fluxd")
		}
		return s.podPatch(deployment, fp, state, o.Args)
	}
	if o.Install != nil {
		ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": o.Namespace}}}
		privileged(ns)
		if err := s.apply(ctx, append([]*unstructured.Unstructured{ns}, prereqs...)); err != nil {
			return nil, err
		}
		if err := o.Install(ctx, FluxdPodInstall{Namespace: o.Namespace, GitURL: gs.GitURL, GitBranch: s.GitBranch, GitPath: s.GitPath,
			Image: o.Image, Patch: patch}); err != nil {
			return nil, err
		}
	} else {
		rendered, err := exec.CommandContext(ctx, o.Fluxctl, "install", "--namespace", o.Namespace,
			"--git-url", gs.GitURL, "--git-branch", s.GitBranch, "--git-path", s.GitPath, "--image", o.Image).Output()
		if err != nil {
			return nil, fmt.Errorf("fluxctl install: %w%s", err, stderrOf(err))
		}
		objs, err := decodeObjects(rendered)
		if err != nil {
			return nil, fmt.Errorf("reading fluxctl install's output: %w", err)
		}
		objs = append(objs, prereqs...)
		if err := patch(objs); err != nil {
			return nil, fmt.Errorf("fluxctl install's output: %w", err)
		}
		if err := s.apply(ctx, objs); err != nil {
			return nil, err
		}
	}
	// The pod serves before git is cloned: the deploy key it generated
	// into fluxd-ssh is what 'fluxctl identity' prints; the stack's sshd
	// authorizes it, as a user adds it to the git host.
	c, err := s.client()
	if err != nil {
		return nil, err
	}
	err = waitFor(ctx, nil, 120*time.Second, "fluxd's pod serving 'fluxctl identity'", func() error {
		cmd := exec.CommandContext(ctx, o.Fluxctl, "identity")
		cmd.Env = append(os.Environ(), "FLUX_URL="+fp.Addr, "FLUX_TOKEN="+fp.Tokens["admin"])
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("fluxctl identity: %w%s; pods: %s", err, stderrOf(err), s.podsSummary(ctx, o.Namespace))
		}
		fp.Identity = strings.TrimSpace(string(out))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := gs.Authorize(fp.Identity); err != nil {
		return nil, err
	}
	err = waitFor(ctx, nil, 120*time.Second, "fluxd's pod Ready", func() error {
		d, err := c.AppsV1().Deployments(o.Namespace).Get(ctx, "fluxd", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !rolledOut(d) {
			return fmt.Errorf("deployment fluxd: %d/%d available; pods: %s", d.Status.AvailableReplicas, *d.Spec.Replicas, s.podsSummary(ctx, o.Namespace))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fp, nil
}

// privileged makes a Namespace enforce the "privileged" Pod Security
// level: the host's network and a hostPath are not "restricted". It still
// warns and audits "restricted".
func privileged(ns *unstructured.Unstructured) {
	labels := ns.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels["pod-security.kubernetes.io/enforce"] = "privileged"
	labels["pod-security.kubernetes.io/warn"] = "restricted"
	labels["pod-security.kubernetes.io/audit"] = "restricted"
	ns.SetLabels(labels)
}

// podPatch makes the rendered Deployment run on the stack (see the top of
// this file) and fills fp's addresses, once: a second render (an upgrade)
// keeps them.
func (s *Stack) podPatch(d *unstructured.Unstructured, fp *FluxdPod, state string, extra []string) error {
	addrs := map[string]*string{"listen": &fp.Addr, "webhook-listen": &fp.WebhookAddr, "metrics-listen": &fp.MetricsAddr, "health-listen": &fp.HealthAddr, "web-listen": &fp.WebAddr}
	for _, p := range addrs {
		if *p != "" {
			continue
		}
		a, err := FreeAddr()
		if err != nil {
			return err
		}
		*p = a
	}
	// The kubelet probes the pod's IP, which on the host's network is the
	// node's: the health listener is there, the others on loopback.
	_, hp, _ := net.SplitHostPort(fp.HealthAddr)
	fp.HealthAddr = net.JoinHostPort(s.NodeIP(), hp)
	api, err := url.Parse(s.APIServer)
	if err != nil {
		return err
	}
	spec := d.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	spec["hostNetwork"] = true
	spec["dnsPolicy"] = "ClusterFirstWithHostNet"
	tol, sel := OnRealNode()
	spec["tolerations"] = []any{map[string]any{"key": tol[0].Key, "operator": string(tol[0].Operator), "effect": string(tol[0].Effect)}}
	spec["nodeSelector"] = map[string]any{"kubernetes.io/hostname": sel["kubernetes.io/hostname"]}
	for _, v := range spec["volumes"].([]any) {
		v := v.(map[string]any)
		if v["name"] == "state" && state != "" {
			delete(v, "emptyDir")
			v["hostPath"] = map[string]any{"path": state, "type": "Directory"}
		}
	}
	var c map[string]any
	for _, ci := range spec["containers"].([]any) {
		if ci.(map[string]any)["name"] == "fluxd" {
			c = ci.(map[string]any)
		}
	}
	if c == nil {
		return errors.New("the rendered Deployment has no container fluxd")
	}
	var args []any
	for _, a := range c["args"].([]any) {
		flag, _, _ := strings.Cut(strings.TrimPrefix(a.(string), "--"), "=")
		if p, ok := addrs[flag]; ok {
			args = append(args, "--"+flag+"="+*p)
			continue
		}
		args = append(args, a)
	}
	if !containsPrefix(args, "--web-listen=") {
		args = append(args, "--web-listen="+fp.WebAddr)
	}
	for _, a := range extra {
		args = append(args, a)
	}
	c["args"] = args
	ports := map[string]string{"grpc": fp.Addr, "webhook": fp.WebhookAddr, "metrics": fp.MetricsAddr, "health": fp.HealthAddr}
	for _, pi := range c["ports"].([]any) {
		p := pi.(map[string]any)
		if a, ok := ports[p["name"].(string)]; ok {
			_, port, _ := net.SplitHostPort(a)
			n, _ := strconv.Atoi(port)
			p["containerPort"] = int64(n)
		}
	}
	// Adapting a Deployment twice replaces the variables rather than
	// adding them again.
	env, _ := c["env"].([]any)
	env = slices.DeleteFunc(slices.Clone(env), func(e any) bool {
		n, _ := e.(map[string]any)["name"].(string)
		return n == "KUBERNETES_SERVICE_HOST" || n == "KUBERNETES_SERVICE_PORT"
	})
	c["env"] = append(env,
		map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": api.Hostname()},
		map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": api.Port()})
	return nil
}

// AdaptFluxdManifests changes an install rendered by 'fluxctl install'
// (the Deployment fluxd and its Namespace ns) so that it runs on the
// stack's real node, as InstallFluxdPod changes what it applies (see the
// top of this file), but for the state volume, which stays as rendered.
// It returns the manifests, one JSON document each, and the addresses
// the pod will listen on (no tokens: the user made them). Changing the
// file before kubectl applies it, rather than the objects after, keeps
// kubectl's record of what was applied true, so that a later apply of
// another rendering merges as it would on a cluster.
func (s *Stack) AdaptFluxdManifests(rendered []byte, ns string) ([]byte, *FluxdPod, error) {
	if !s.HasRealNode() {
		return nil, nil, errors.New("fluxd in a pod needs the real node (the stack was started without it)")
	}
	objs, err := decodeObjects(rendered)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the rendered install: %w", err)
	}
	fp := &FluxdPod{Namespace: ns}
	var adapted bool
	var out bytes.Buffer
	for _, obj := range objs {
		switch {
		case obj.GetKind() == "Deployment" && obj.GetName() == "fluxd" && obj.GetNamespace() == ns:
			if err := s.podPatch(obj, fp, "", nil); err != nil {
				return nil, nil, err
			}
			adapted = true
		case obj.GetKind() == "Namespace" && obj.GetName() == ns:
			labels := obj.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels["pod-security.kubernetes.io/enforce"] = "privileged"
			obj.SetLabels(labels)
		}
		b, err := obj.MarshalJSON()
		if err != nil {
			return nil, nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
		out.WriteString("\n")
	}
	if !adapted {
		return nil, nil, fmt.Errorf("the rendered install has no Deployment %s/fluxd", ns)
	}
	return out.Bytes(), fp, nil
}

func containsPrefix(args []any, prefix string) bool {
	for _, a := range args {
		if strings.HasPrefix(a.(string), prefix) {
			return true
		}
	}
	return false
}

// podsSummary says in one line what the pods of ns are doing.
func (s *Stack) podsSummary(ctx context.Context, ns string) string {
	c, err := s.client()
	if err != nil {
		return err.Error()
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		line := p.Name + " " + string(p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				line += fmt.Sprintf(" (%s waiting: %s %s)", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				line += fmt.Sprintf(" (%s terminated: %s, exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
			case cs.State.Running != nil:
				line += fmt.Sprintf(" (%s running, ready=%v)", cs.Name, cs.Ready)
			}
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

func object(apiVersion, kind, ns, name string, fields map[string]any) *unstructured.Unstructured {
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name, "namespace": ns}}
	for k, v := range fields {
		obj[k] = v
	}
	return &unstructured.Unstructured{Object: obj}
}

func decodeObjects(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(obj.Object) > 0 {
			out = append(out, &obj)
		}
	}
}

// apply applies objs with server-side apply, in order.
func (s *Stack) apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	rc, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return err
	}
	// The stack's own adaptation of fluxd's pod (host network, for want
	// of kube-proxy: docs/realnode.md) draws the namespace's "would
	// violate PodSecurity restricted" warning by design; printed raw by
	// klog on every make up, it read as a fault. Nothing else the stack
	// applies warns.
	rc.WarningHandler = rest.NoWarnings{}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(m.Resource).Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj,
			metav1.ApplyOptions{FieldManager: "fluxd-stack", Force: true}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}

func stderrOf(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return ": " + strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// fluxdPodMarker, in a stack's directory, says its demo fluxd runs in a
// pod (its namespace is the file's content), not as a process.
const fluxdPodMarker = "fluxd-pod"

// RecordFluxdPod marks the stack under dir as running its fluxd in a pod.
func RecordFluxdPod(dir, namespace string) error {
	return os.WriteFile(filepath.Join(dir, fluxdPodMarker), []byte(namespace), 0o644)
}

// FluxdPodNamespace returns the namespace of the stack's fluxd pod, or ""
// when its fluxd is a process.
func FluxdPodNamespace(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, fluxdPodMarker))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// RestartFluxdPod restarts the stack's fluxd pod as an operator does:
// it deletes the pod (the kubelet sends SIGTERM, and SIGKILL after the
// grace period), the Deployment makes a new one on the same state, and
// this waits until the new one is Ready. It returns the new pod's name.
// ns is fluxd's namespace in the stack under dir.
func RestartFluxdPod(ctx context.Context, dir, ns string) (string, error) {
	if ns == "" {
		return "", fmt.Errorf("the stack under %s runs no fluxd pod", dir)
	}
	s := &Stack{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	c, err := s.client()
	if err != nil {
		return "", err
	}
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=fluxd"}
	old, err := c.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		return "", err
	}
	gone := map[string]bool{}
	for _, p := range old.Items {
		gone[p.Name] = true
		if err := c.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			return "", fmt.Errorf("deleting pod %s: %w", p.Name, err)
		}
	}
	var name string
	err = waitFor(ctx, nil, 120*time.Second, "a new fluxd pod Ready", func() error {
		pods, err := c.CoreV1().Pods(ns).List(ctx, sel)
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if gone[p.Name] || p.DeletionTimestamp != nil {
				continue
			}
			for _, cond := range p.Status.Conditions {
				if cond.Type == "Ready" && cond.Status == "True" {
					name = p.Name
					return nil
				}
			}
		}
		return fmt.Errorf("pods: %s", s.podsSummary(ctx, ns))
	})
	return name, err
}

// BuildFluxdImage builds fluxd's image as 'make image' does (static
// binaries, then hack/image) with version, pushes it to the stack's
// registry as fluxd:version and returns its reference by digest. The
// static binaries are built once into workDir.
func (s *Stack) BuildFluxdImage(ctx context.Context, workDir, version string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	static := filepath.Join(workDir, "static")
	if _, err := os.Stat(filepath.Join(static, "fluxd")); err != nil {
		cmd := exec.CommandContext(ctx, "make", "-s", "static", "STATIC_DIR="+static)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("make static: %w\n%s", err, out)
		}
	}
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/image", "--fluxd", filepath.Join(static, "fluxd"),
		"--fluxctl", filepath.Join(static, "fluxctl"), "--version", version, "--image", s.Registry+"/fluxd:"+version)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/image: %w%s", err, stderrOf(err))
	}
	return strings.TrimSpace(string(out)), nil
}
