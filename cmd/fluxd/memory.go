package main

import (
	"log/slog"

	"github.com/fluxd/fluxd/internal/memlimit"
)

// applyMemoryLimit sets the Go runtime's soft memory limit from the
// container's (--memory-limit-ratio; see internal/memlimit for why the
// cgroup rather than the manifest) and says so in the log. A cgroup file
// fluxd cannot read is a warning, not a failure: fluxd runs as it did
// without a limit.
func applyMemoryLimit(ratio float64, log *slog.Logger) {
	log = log.With("component", "memory")
	d, err := memlimit.Apply(memlimit.CgroupRoot, ratio)
	switch {
	case err != nil:
		log.Warn("no soft memory limit: "+err.Error(), "ratio", ratio)
	case d.Source == memlimit.FromContainer:
		log.Info("soft memory limit from the container's", "soft_limit_bytes", d.Soft, "container_limit_bytes", d.Container, "ratio", ratio)
	case d.Source == memlimit.FromEnv:
		log.Info("soft memory limit from GOMEMLIMIT", "soft_limit_bytes", d.Soft)
	case d.Source == memlimit.None:
		log.Info("no soft memory limit: the container has no memory limit (" + memlimit.CgroupRoot + ")")
	default:
		log.Info("no soft memory limit: --memory-limit-ratio=0")
	}
}
