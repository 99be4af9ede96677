package daemon

import (
	"context"
	"log/slog"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
)

// Cluster is what the daemon needs from the cluster.
type Cluster interface {
	Workloads(ctx context.Context) ([]platform.Workload, error)
}

// Daemon implements fluxd's operations over domain types. Every operation
// takes the caller's identity, so that records are kept per instance.
type Daemon struct {
	cfg     Config
	cluster Cluster
	log     *slog.Logger
}

// New returns a Daemon. cfg must have passed Validate.
func New(cfg Config, cluster Cluster, log *slog.Logger) *Daemon {
	return &Daemon{cfg: cfg, cluster: cluster, log: log.With("component", "daemon")}
}

// ListServices lists the workloads in the cluster, optionally in one
// namespace. The cluster is shared by all instances: what differs per
// instance is the history, jobs and policies kept about it.
func (d *Daemon) ListServices(ctx context.Context, _ auth.Identity, namespace string) ([]platform.Workload, error) {
	all, err := d.cluster.Workloads(ctx)
	if err != nil {
		return nil, err
	}
	if namespace == "" {
		return all, nil
	}
	var out []platform.Workload
	for _, w := range all {
		if w.ID.Namespace == namespace {
			out = append(out, w)
		}
	}
	return out, nil
}
