package localstack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Cluster is a second, light cluster beside the stack's: its own etcd
// and API server (its own CA and admin token), the controllers that make
// a Deployment roll out, a scheduler and kwok with one fake node. No
// registry, git remote or workloads of its own: a fluxd pointed at it
// (--kubeconfig=Kubeconfig) applies what its git path holds, and pulls
// from the stack's registry. The cross-cluster promotion test starts
// one; no other test pays for it.
type Cluster struct {
	Name string
	// Kubeconfig is an admin kubeconfig for its API server.
	Kubeconfig string
	// APIServer is its API server's URL.
	APIServer string
	// Dir holds its state and logs (logs/NAME.log).
	Dir string
	// Took is how long it took to start.
	Took time.Duration

	s *Stack
}

// lightControllers are the controllers a Deployment needs to roll out
// on kwok nodes: ReplicaSets from the Deployment, pods from the
// ReplicaSet, each namespace's default ServiceAccount (without which
// the API server refuses the pods), and node lifecycle (which lifts the
// not-ready taint a new node is created with, once kwok makes it Ready).
// No garbage collection, no endpoints: nothing a test of promotion reads.
const lightControllers = "deployment,replicaset,serviceaccount,nodelifecycle"

// StartCluster starts a light cluster called name (its state under
// Dir/clusters/NAME), stopped with the stack or by Cluster.Stop.
func (s *Stack) StartCluster(ctx context.Context, name string) (c *Cluster, err error) {
	start := time.Now()
	dir := filepath.Join(s.Dir, "clusters", name)
	opts := s.opts
	opts.Nodes, opts.RealNode = 1, false
	sub := &Stack{Dir: dir, opts: opts, detach: s.detach, controllers: lightControllers}
	defer func() {
		if err != nil {
			sub.Stop()
		}
	}()
	for _, d := range []string{"logs", "pids", "pki", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	for _, step := range []struct {
		what string
		fn   func(context.Context) error
	}{
		{"etcd", sub.startEtcd},
		{"kube-apiserver", sub.startAPIServer},
		{"controller-manager and scheduler", sub.startControllers},
		{"kwok and a fake node", sub.startKwok},
	} {
		t := time.Now()
		if err := step.fn(ctx); err != nil {
			return nil, fmt.Errorf("starting cluster %s: %s: %w", name, step.what, err)
		}
		s.logf("cluster %s: %-34s ready in %v", name, step.what, time.Since(t).Round(10*time.Millisecond))
	}
	c = &Cluster{Name: name, Kubeconfig: sub.Kubeconfig, APIServer: sub.APIServer, Dir: dir, Took: time.Since(start), s: sub}
	s.clustersMu.Lock()
	s.clusters = append(s.clusters, c)
	s.clustersMu.Unlock()
	return c, nil
}

// Stop stops the cluster's processes.
func (c *Cluster) Stop() { c.s.Stop() }

// PIDs are its processes' IDs, by name.
func (c *Cluster) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range c.s.procs {
		out[p.name] = p.cmd.Process.Pid
	}
	return out
}
