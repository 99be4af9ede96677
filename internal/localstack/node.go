package localstack

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The real node: a kubelet on containerd and runc, with a CNI bridge of its
// own, registered beside the kwok nodes. It runs containers for real: the
// stack's demo fluxd, and the tests' rollouts that must fail the way pods
// fail.
const (
	// RealNodeName is the real node's name.
	RealNodeName = "fluxd-node"
	// RealNodeTaint keeps pods off the real node unless they tolerate it
	// (the example workloads' images are random layers that run nothing).
	// Pods meant to run there tolerate it and select the node by name.
	RealNodeTaint = "fluxd.io/real-node"
	// pauseImage is the sandbox image, built by stack/build.sh from
	// stack/node/pause and pushed to the stack's registry.
	pauseRepo = "fluxd-stack/pause"
	pauseTag  = "1"
	// cniBinDir is where Debian's containernetworking-plugins install.
	cniBinDir = "/usr/lib/cni"
)

// nodeState is what 'make down' needs to tear the node down from the state
// directory alone; kept in node/node.json.
type nodeState struct {
	// RunDir holds the sockets (a short path: unix sockets have a limit).
	RunDir string `json:"runDir"`
	// Dir holds containerd's root and state, the kubelet's root and CNI.
	Dir string `json:"dir"`
	// Bridge is the CNI bridge's name in the host's network namespace.
	Bridge string `json:"bridge"`
	// Subnet is the pod network.
	Subnet string `json:"subnet"`
	// CgroupRoot is the kubelet's cgroup root, under every controller.
	CgroupRoot string `json:"cgroupRoot"`
}

func (n nodeState) socket() string { return filepath.Join(n.RunDir, "containerd.sock") }

// gateway is the bridge's address: the node's IP, x.y.z.1 of the subnet.
func (n nodeState) gateway() string {
	ip, _, err := net.ParseCIDR(n.Subnet)
	if err != nil {
		return ""
	}
	ip4 := ip.To4()
	return net.IPv4(ip4[0], ip4[1], ip4[2], 1).String()
}

// NodeIP is the real node's IP: its bridge's address on this machine, on
// the pod network of the stack's own. A pod on the host's network has it.
func (s *Stack) NodeIP() string {
	if s.node == nil {
		return ""
	}
	return s.node.gateway()
}

// makeBridge creates the node's bridge with the gateway address, unless it
// exists.
func makeBridge(n nodeState) error {
	if _, err := os.Stat("/sys/class/net/" + n.Bridge); err == nil {
		return nil
	}
	_, ipn, err := net.ParseCIDR(n.Subnet)
	if err != nil {
		return err
	}
	ones, _ := ipn.Mask.Size()
	for _, args := range [][]string{
		{"link", "add", "name", n.Bridge, "type", "bridge"},
		{"addr", "add", n.gateway() + "/" + strconv.Itoa(ones), "dev", n.Bridge},
		{"link", "set", n.Bridge, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// RealNodeWanted reports whether a stack should start the real node: yes,
// unless FLUXD_STACK_REAL_NODE=0 asks for fake nodes only.
func RealNodeWanted() bool { return os.Getenv("FLUXD_STACK_REAL_NODE") != "0" }

// RealNodeMissing says what this machine lacks to run the real node, or ""
// when nothing is missing.
func RealNodeMissing(binDir string) string {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (the kubelet and containerd run as root, as 'make up' does)")
	}
	for _, b := range []string{"containerd", "containerd-shim-runc-v2", "runc"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b+" (Debian: containerd, runc)")
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback", "portmap"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			missing = append(missing, filepath.Join(cniBinDir, p)+" (Debian: containernetworking-plugins)")
		}
	}
	for _, b := range []string{"kubelet", "pause"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			missing = append(missing, filepath.Join(binDir, b)+" (stack/build.sh builds it)")
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return strings.Join(missing, "; ")
}

func newNodeState(stackDir string) (nodeState, error) {
	sum := sha256.Sum256([]byte(stackDir))
	id := hex.EncodeToString(sum[:])[:8]
	subnet, err := freeSubnet(sum[0])
	if err != nil {
		return nodeState{}, err
	}
	return nodeState{
		RunDir:     "/run/fluxd-node-" + id,
		Dir:        filepath.Join(stackDir, "node"),
		Bridge:     "fxd" + id,
		Subnet:     subnet,
		CgroupRoot: "/fluxd-node-" + id,
	}, nil
}

// freeSubnet picks a /24 in 10.244.0.0/16 that no interface of this machine
// is on, starting from seed, so that stacks side by side get networks of
// their own.
func freeSubnet(seed byte) (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	used := map[int]bool{}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if ip4 := ipn.IP.To4(); ip4 != nil && ip4[0] == 10 && ip4[1] == 244 {
				used[int(ip4[2])] = true
			}
		}
	}
	for i := 0; i < 250; i++ {
		c := (int(seed) + i) % 250
		if !used[c] {
			return fmt.Sprintf("10.244.%d.0/24", c), nil
		}
	}
	return "", errors.New("no free /24 in 10.244.0.0/16 for the pod network")
}

// startNode starts containerd and the kubelet and waits for the node to be
// Ready. It runs after the registry (the sandbox image is pulled from it).
func (s *Stack) startNode(ctx context.Context) error {
	if miss := RealNodeMissing(s.opts.BinDir); miss != "" {
		return fmt.Errorf("this machine cannot run the real node: missing %s. Run 'make deps' and stack/build.sh, or start the stack without it (FLUXD_STACK_REAL_NODE=0: fake nodes only)", miss)
	}
	n, err := newNodeState(s.Dir)
	if err != nil {
		return err
	}
	for _, d := range []string{n.RunDir, n.Dir, filepath.Join(n.Dir, "cni"), filepath.Join(n.Dir, "certs.d"), filepath.Join(n.Dir, "kubelet"), filepath.Join(n.Dir, "pod-logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "node.json"), b, 0o644); err != nil {
		return err
	}
	s.node = &n
	if err := s.pushPause(ctx); err != nil {
		return fmt.Errorf("pushing the sandbox image: %w", err)
	}
	if err := s.writeNodeConfig(n); err != nil {
		return err
	}
	// The bridge, made before the kubelet starts: its gateway address is
	// the node's IP (the kubelet refuses a loopback one), on a network of
	// the stack's own. The CNI bridge plugin finds it and adds the pods.
	if err := makeBridge(n); err != nil {
		return err
	}
	ctrd, err := s.spawn("containerd", "containerd", "--config", filepath.Join(n.Dir, "containerd.toml"))
	if err != nil {
		return err
	}
	if err := waitFor(ctx, ctrd, 30*time.Second, "containerd's socket", func() error {
		c, err := net.Dial("unix", n.socket())
		if err != nil {
			return err
		}
		return c.Close()
	}); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	healthz, err := freePort()
	if err != nil {
		return err
	}
	if err := s.writeKubeletConfig(n, port, healthz); err != nil {
		return err
	}
	// The kubelet wants its cgroup root to exist in every hierarchy.
	if err := makeCgroups(n.CgroupRoot); err != nil {
		return err
	}
	kl, err := s.spawn("kubelet", s.bin("kubelet"),
		"--config="+filepath.Join(n.Dir, "kubelet.yaml"),
		"--kubeconfig="+s.Kubeconfig,
		"--root-dir="+filepath.Join(n.Dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.Dir, "kubelet", "pki"),
		"--volume-plugin-dir="+filepath.Join(n.Dir, "kubelet", "volume-plugins"),
		"--hostname-override="+RealNodeName,
		"--node-ip="+n.gateway(),
		"--node-labels=fluxd.io/real-node=true",
		"--v=1",
	)
	if err != nil {
		return err
	}
	c, err := s.client()
	if err != nil {
		return err
	}
	return waitFor(ctx, kl, 120*time.Second, "the real node Ready", func() error {
		node, err := c.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s: Ready=%s: %s: %s", RealNodeName, cond.Status, cond.Reason, cond.Message)
			}
		}
		return fmt.Errorf("node %s: no Ready condition yet", RealNodeName)
	})
}

// PauseImage is the real node's sandbox image in the stack's registry.
func (s *Stack) PauseImage() string { return s.Registry + "/" + pauseRepo + ":" + pauseTag }

func (s *Stack) pushPause(ctx context.Context) error {
	layer, err := fileLayer(s.bin("pause"), "/pause")
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Entrypoint = []string{"/pause"}
	cf.Config.User = "65535:65535"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return err
	}
	ref, err := name.ParseReference(s.PauseImage(), name.Insecure)
	if err != nil {
		return err
	}
	return remote.Write(ref, img, remote.WithContext(ctx))
}

// writeNodeConfig writes containerd's configuration, its trust of the
// stack's registry (plain HTTP on loopback) and the CNI network.
func (s *Stack) writeNodeConfig(n nodeState) error {
	root := filepath.Join(n.Dir, "containerd")
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  # No CAP_SYS_RESOURCE here (seen: runc "can't get final child's PID from
  # pipe: EOF" for the sandbox's oom_score_adj -998): keep containers'
  # oom_score_adj at or above containerd's own.
  restrict_oom_score_adj = true
  enable_unprivileged_ports = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[6]q
    conf_dir = %[7]q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[8]q
`, filepath.Join(root, "root"), filepath.Join(n.RunDir, "state"), n.socket(), n.socket()+".ttrpc",
		s.PauseImage(), cniBinDir, filepath.Join(n.Dir, "cni"), filepath.Join(n.Dir, "certs.d"))
	if err := os.WriteFile(filepath.Join(n.Dir, "containerd.toml"), []byte(cfg), 0o644); err != nil {
		return err
	}
	hosts := filepath.Join(n.Dir, "certs.d", s.Registry)
	if err := os.MkdirAll(hosts, 0o755); err != nil {
		return err
	}
	h := fmt.Sprintf("server = %[1]q\n[host.%[1]q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+s.Registry)
	if err := os.WriteFile(filepath.Join(hosts, "hosts.toml"), []byte(h), 0o644); err != nil {
		return err
	}
	cni := map[string]any{
		"cniVersion": "0.4.0",
		"name":       n.Bridge,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": n.Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": n.Subnet}}},
					"dataDir": filepath.Join(n.Dir, "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	b, err := json.MarshalIndent(cni, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(n.Dir, "cni", "10-fluxd.conflist"), b, 0o644)
}

func (s *Stack) writeKubeletConfig(n nodeState, port, healthz int) error {
	cfg := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The machine has cgroup v1 controllers only (no systemd): the kubelet
# refuses cgroup v1 unless told, and uses cgroupfs.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: ` + n.CgroupRoot + `
containerRuntimeEndpoint: unix://` + n.socket() + `
address: ` + n.gateway() + `
port: ` + strconv.Itoa(port) + `
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: ` + strconv.Itoa(healthz) + `
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: ` + s.pki("ca.crt") + `}
authorization:
  mode: AlwaysAllow
registerWithTaints:
  - {key: ` + RealNodeTaint + `, value: "true", effect: NoSchedule}
failSwapOn: false
podLogsDir: ` + filepath.Join(n.Dir, "pod-logs") + `
resolvConf: /etc/resolv.conf
serializeImagePulls: false
# A shared machine's disk: evict nothing for the stack's sake.
evictionHard: {memory.available: "50Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
`
	return os.WriteFile(filepath.Join(n.Dir, "kubelet.yaml"), []byte(cfg), 0o644)
}

// fileLayer is a one-file image layer: path on disk at dest, mode 0755.
func fileLayer(path, dest string) (v1.Layer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(dest, "/"), Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(b); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil })
}

// AppModes are the behaviours of the test program in PushAppImage's
// images (internal/testapp).
const (
	AppServe    = "serve"
	AppCrash    = "crash"
	AppNotReady = "notready"
)

// PushAppImage builds internal/testapp (once per stack), puts it in an
// image as /app with APP_MODE=mode and pushes it to the stack's registry as
// repo:tag. Its containers run on the real node for real.
func (s *Stack) PushAppImage(ctx context.Context, repo, tag, mode string) (string, error) {
	s.appOnce.Do(func() {
		root, err := ModuleRoot()
		if err != nil {
			s.appErr = err
			return
		}
		out := filepath.Join(s.Dir, "testapp")
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./internal/testapp")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		if b, err := cmd.CombinedOutput(); err != nil {
			s.appErr = fmt.Errorf("building internal/testapp: %v: %s", err, b)
		}
	})
	if s.appErr != nil {
		return "", s.appErr
	}
	layer, err := fileLayer(filepath.Join(s.Dir, "testapp"), "/app")
	if err != nil {
		return "", err
	}
	// A layer of the image's own (its tag in a file), so that
	// UnpullableAppImage can break one image without the others.
	tagFile := filepath.Join(s.Dir, "testapp-tag-"+repo+"-"+tag)
	if err := os.WriteFile(tagFile, []byte(repo+":"+tag+"\n"), 0o644); err != nil {
		return "", err
	}
	own, err := fileLayer(tagFile, "/etc/testapp-tag")
	if err != nil {
		return "", err
	}
	img, err := mutate.AppendLayers(empty.Image, layer, own)
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Entrypoint = []string{"/app"}
	cf.Config.User = "65532:65532"
	cf.Config.Env = []string{"APP_MODE=" + mode, "APP_VERSION=" + tag}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return "", err
	}
	ref := s.Registry + "/" + repo + ":" + tag
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	if err := remote.Write(r, img, remote.WithContext(ctx)); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	return ref, nil
}

// UnpullableAppImage pushes an image as PushAppImage does, then removes
// its own layer from the registry's disk: the tag, its manifest and its
// configuration are there (fluxd lists it and releases it), but no node
// can pull it.
func (s *Stack) UnpullableAppImage(ctx context.Context, repo, tag string) (string, error) {
	ref, err := s.PushAppImage(ctx, repo, tag, AppServe)
	if err != nil {
		return "", err
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return "", err
	}
	img, err := remote.Image(r, remote.WithContext(ctx))
	if err != nil {
		return "", err
	}
	layers, err := img.Layers()
	if err != nil {
		return "", err
	}
	h, err := layers[len(layers)-1].Digest()
	if err != nil {
		return "", err
	}
	if err := os.Remove(filepath.Join(s.Dir, "registry", h.Algorithm, h.Hex)); err != nil {
		return "", fmt.Errorf("removing a layer of %s from the registry: %w", ref, err)
	}
	return ref, nil
}

// HasRealNode reports whether the stack runs the real node.
func (s *Stack) HasRealNode() bool { return s.node != nil }

// OnRealNode returns what a pod spec needs to run on the real node: its
// toleration of RealNodeTaint and a node selector for it.
func OnRealNode() ([]corev1.Toleration, map[string]string) {
	return []corev1.Toleration{{Key: RealNodeTaint, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		map[string]string{"kubernetes.io/hostname": RealNodeName}
}
