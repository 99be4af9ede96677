package localstack

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/fluxd/fluxd/internal/pgserver"
)

// Options configure a stack.
type Options struct {
	// Dir holds the stack's state, logs and PID files. Required.
	Dir string
	// BinDir holds the binaries stack/build.sh built. Required.
	BinDir string
	// Nodes is the number of fake nodes; default 2.
	Nodes int
	// Detach leaves the processes running after this process exits, for
	// 'make up'; StopDir stops them. Otherwise they die with this process.
	Detach bool
	// Log receives one line per step; nil discards.
	Log io.Writer
	// DB "postgres" puts every fluxd the stack starts (without a
	// --history-db of its own) on a PostgreSQL server the stack starts
	// on first use, a database per fluxd name; "" or "sqlite" leaves
	// each on a SQLite file in its state directory.
	DB string
	// RealNode starts a kubelet on containerd beside the fake nodes
	// (node.go): a node that runs containers, tainted RealNodeTaint.
	RealNode bool
	// ControllerQPS is kube-controller-manager's --kube-api-qps (its burst
	// twice that); 0 keeps its default of 20, as a real cluster's. A bench
	// that creates thousands of Deployments raises it, or it waits tens of
	// minutes for the deployment controller (make bench-fleet).
	ControllerQPS int
}

// Stack is a running local stack.
type Stack struct {
	// Dir is the state directory.
	Dir string
	// Kubeconfig is an admin kubeconfig for the API server.
	Kubeconfig string
	// APIServer is the API server's URL.
	APIServer string
	// Registry is the OCI registry's host:port.
	Registry string
	// GitURL is the file:// URL of the bare manifests repository.
	GitURL string
	// GitBranch is the branch the manifests are on.
	GitBranch string
	// GitPath is the directory of the manifests inside the repository.
	GitPath string
	// Services are the IDs of the seeded example workloads.
	Services []string

	opts       Options
	detach     bool
	adminToken string
	etcdURL    string
	procs      []*process
	http       *http.Client

	node *nodeState // the real node, when it runs

	appOnce sync.Once // builds internal/testapp for PushAppImage
	appErr  error

	// controllers is kube-controller-manager's --controllers; "": all
	// but nodeipam. A light cluster (StartCluster) runs fewer.
	controllers string
	clustersMu  sync.Mutex
	clusters    []*Cluster

	pgMu  sync.Mutex
	pg    *pgserver.Server
	pgDBs map[string]string // database URL by fluxd name
}

// Start brings up every component under opts.Dir and seeds the registry,
// the git remote and the cluster. On error, whatever started is stopped.
func Start(ctx context.Context, opts Options) (st *Stack, err error) {
	if opts.Dir == "" || opts.BinDir == "" {
		return nil, errors.New("localstack: Dir and BinDir are required")
	}
	switch opts.DB {
	case "", "sqlite", "postgres":
	default:
		return nil, fmt.Errorf("localstack: database %q: use sqlite (the default) or postgres", opts.DB)
	}
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	s := &Stack{Dir: dir, opts: opts, detach: opts.Detach}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	for _, d := range []string{"logs", "pids", "pki", "etcd", "registry", "git"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	steps := []struct {
		what string
		fn   func(context.Context) error
	}{
		{"etcd", s.startEtcd},
		{"kube-apiserver", s.startAPIServer},
		{"controller-manager and scheduler", s.startControllers},
		{"kwok and fake nodes", s.startKwok},
		{"OCI registry", s.startRegistry},
		{"real node (kubelet on containerd)", s.startNode},
		{"example images", s.seedImages},
		{"git remote", s.seedGit},
		{"example workloads", s.applyManifests},
	}
	for _, step := range steps {
		if step.what == "real node (kubelet on containerd)" && !opts.RealNode {
			continue
		}
		t := time.Now()
		if err := step.fn(ctx); err != nil {
			return nil, fmt.Errorf("starting the local stack: %s: %w", step.what, err)
		}
		s.logf("%-34s ready in %v", step.what, time.Since(t).Round(10*time.Millisecond))
	}
	return s, nil
}

// Stop stops every process this Stack started, dependents first.
func (s *Stack) Stop() {
	s.clustersMu.Lock()
	for _, c := range s.clusters {
		c.Stop()
	}
	s.clusters = nil
	s.clustersMu.Unlock()
	// The real node first: its pods, mounts and bridge outlive the
	// processes otherwise.
	if err := teardownNode(s.Dir); err != nil {
		s.logf("stopping the real node: %v", err)
	}
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		p.stop(10 * time.Second)
		_ = os.Remove(filepath.Join(s.Dir, "pids", p.name+".pid"))
		_ = os.Remove(filepath.Join(s.Dir, "pids", p.name+".exe"))
	}
	s.procs = nil
	s.stopPostgres()
}

// Log returns the path of a component's log.
func (s *Stack) Log(name string) string { return filepath.Join(s.Dir, "logs", name+".log") }

func (s *Stack) logf(format string, args ...any) {
	fmt.Fprintf(s.opts.Log, "stack: "+format+"\n", args...)
}

func (s *Stack) bin(name string) string { return filepath.Join(s.opts.BinDir, name) }

func (s *Stack) pki(name string) string { return filepath.Join(s.Dir, "pki", name) }

// waitFor polls check until it returns nil, p dies, or timeout passes.
func waitFor(ctx context.Context, p *process, timeout time.Duration, what string, check func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if p != nil {
			if err := p.died(); err != nil {
				return err
			}
		}
		if last = check(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := fmt.Sprintf("%s: %v after %v (last error: %v)", what, errTimeout, timeout, last)
			if p != nil {
				msg += fmt.Sprintf("; the end of %s:\n%s", p.logPath, tail(p.logPath, 15))
			}
			return errors.New(msg)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Stack) startEtcd(ctx context.Context) error {
	client, err := freePort()
	if err != nil {
		return err
	}
	peer, err := freePort()
	if err != nil {
		return err
	}
	cu := "http://127.0.0.1:" + strconv.Itoa(client)
	pu := "http://127.0.0.1:" + strconv.Itoa(peer)
	p, err := s.spawn("etcd", s.bin("etcd"),
		"--name=stack",
		"--data-dir="+filepath.Join(s.Dir, "etcd"),
		"--listen-client-urls="+cu, "--advertise-client-urls="+cu,
		"--listen-peer-urls="+pu, "--initial-advertise-peer-urls="+pu,
		"--initial-cluster=stack="+pu,
		"--force-new-cluster",
		"--unsafe-no-fsync", // test data: speed over durability
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	s.etcdURL = cu
	return waitFor(ctx, p, 60*time.Second, "etcd /health", func() error {
		return httpOK(http.DefaultClient, cu+"/health", "")
	})
}

func httpOK(c *http.Client, url, token string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	return nil
}

func (s *Stack) startAPIServer(ctx context.Context) error {
	if err := writePKI(filepath.Join(s.Dir, "pki")); err != nil {
		return fmt.Errorf("writing certificates: %w", err)
	}
	if err := writeKubeletClientCert(filepath.Join(s.Dir, "pki")); err != nil {
		return fmt.Errorf("writing certificates: %w", err)
	}
	tokenFile := s.pki("tokens.csv")
	if b, err := os.ReadFile(s.pki("admin.token")); err == nil {
		s.adminToken = string(b)
	} else {
		var raw [24]byte
		if _, err := rand.Read(raw[:]); err != nil {
			return err
		}
		s.adminToken = hex.EncodeToString(raw[:])
		if err := os.WriteFile(s.pki("admin.token"), []byte(s.adminToken), 0o600); err != nil {
			return err
		}
	}
	if err := os.WriteFile(tokenFile, []byte(s.adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	s.APIServer = "https://127.0.0.1:" + strconv.Itoa(port)
	p, err := s.spawn("kube-apiserver", s.bin("kube-apiserver"),
		"--etcd-servers="+s.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(s.Dir, "pki", "apiserver"),
		"--tls-cert-file="+s.pki("apiserver.crt"),
		"--tls-private-key-file="+s.pki("apiserver.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+s.pki("sa.pub"),
		"--service-account-signing-key-file="+s.pki("sa.key"),
		"--token-auth-file="+tokenFile,
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--enable-priority-and-fairness=false",
		// The real node's kubelet (logs, exec, port-forward): it trusts
		// the stack's CA and is reached at its InternalIP, 127.0.0.1.
		"--kubelet-client-certificate="+s.pki("kubelet-client.crt"),
		"--kubelet-client-key="+s.pki("kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--v=0",
	)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(s.pki("ca.crt"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	s.http = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	if err := waitFor(ctx, p, 120*time.Second, "kube-apiserver /readyz", func() error {
		return httpOK(s.http, s.APIServer+"/readyz", s.adminToken)
	}); err != nil {
		return err
	}
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	return writeKubeconfig(s.Kubeconfig, s.APIServer, caPEM, s.adminToken)
}

func (s *Stack) startControllers(ctx context.Context) error {
	controllers := s.controllers
	if controllers == "" {
		controllers = "*,-nodeipam"
	}
	args := []string{
		"--kubeconfig=" + s.Kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--secure-port=0",
		"--root-ca-file=" + s.pki("ca.crt"),
		"--service-account-private-key-file=" + s.pki("sa.key"),
		"--use-service-account-credentials=false",
		"--v=0",
	}
	if s.opts.ControllerQPS > 0 {
		args = append(args, fmt.Sprintf("--kube-api-qps=%d", s.opts.ControllerQPS), fmt.Sprintf("--kube-api-burst=%d", 2*s.opts.ControllerQPS))
	}
	kcm, err := s.spawn("kube-controller-manager", s.bin("kube-controller-manager"), args...)
	if err != nil {
		return err
	}
	sched, err := s.spawn("kube-scheduler", s.bin("kube-scheduler"),
		"--kubeconfig="+s.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--v=0",
	)
	if err != nil {
		return err
	}
	// Neither serves a port here; give them a moment to fail loudly.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
	}
	if err := kcm.died(); err != nil {
		return err
	}
	return sched.died()
}

func writeKubeconfig(path, server string, caPEM []byte, token string) error {
	ca := base64.StdEncoding.EncodeToString(caPEM)
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fluxd-stack
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: fluxd-stack
  context:
    cluster: fluxd-stack
    user: admin
current-context: fluxd-stack
`, server, ca, token)
	return os.WriteFile(path, []byte(cfg), 0o600)
}
