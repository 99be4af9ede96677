package main

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"

	"github.com/fluxd/fluxd/internal/memlimit"
)

// applyMemoryLimit sets the Go runtime's soft memory limit from the
// container's (--memory-limit-ratio; see internal/memlimit for why the
// cgroup rather than the manifest) and says so in the log. A cgroup file
// fluxd cannot read is a warning, not a failure: fluxd runs as it did
// without a limit. It reports whether a soft limit is in force, from the
// container or GOMEMLIMIT, for applyGCPercent.
func applyMemoryLimit(ratio float64, log *slog.Logger) (limited bool) {
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
	return err == nil && d.Soft > 0
}

// defaultGCPercent is --gc-percent's default, the collector's target as
// GOGC sets it: a collection starts when the heap has grown by this
// percentage of what the last one left live.
//
// Why 50 rather than Go's 100: at 10,000 workloads the live heap is small
// (about 110 MB after a collection at the end of BenchmarkScale,
// docs/performance.md) but start-up makes a lot of garbage (the sync's
// decoded objects, the automator's first pass), and at 100 the heap runs
// to twice the live heap: with the binary's file-backed pages (about
// 94 MB) fluxd's RSS ended near 400 MB with no memory limit, against a
// target of 300 MB. At 50 the heap runs to 1.5 times the live heap
// (about 165 MB), which keeps RSS under 300 MB without a limit; the soft
// limit (--memory-limit-ratio) holds RSS only where the container has a
// memory limit, not under docker run without -m or as a local binary. The
// cost is collections about twice as often, each in proportion to the
// live heap, which is the small part: a modest CPU cost. Measured at 50
// with the slimmer workload caches (docs/performance.md, scale-2 fourth
// round, four runs): RSS at the end 286–311 MB, GC 5–6 s of 18–24 s of
// CPU. Under a container's limit it applies too, where the soft limit
// alone would hold RSS: collections run more often there than they need.
const defaultGCPercent = 50

// The range --gc-percent takes. Outside it a value is more likely a
// mistake than a choice: below 10 the collector runs nearly all the time,
// above 1000 the heap may reach eleven times the live heap. GOGC takes
// any value, for whoever means one.
const (
	minGCPercent = 10
	maxGCPercent = 1000
)

// validateGCPercent checks a --gc-percent.
func validateGCPercent(p int) error {
	if p < minGCPercent || p > maxGCPercent {
		return fmt.Errorf("--gc-percent=%d: the garbage collector's target is between %d and %d (percent of the live heap the heap may grow by before a collection, as GOGC; default %d). "+
			"To turn the collector's target off, set GOGC=off with a memory limit (GOMEMLIMIT or the container's)", p, minGCPercent, maxGCPercent, defaultGCPercent)
	}
	return nil
}

// gcTarget is what fluxd does about the collector's target.
type gcTarget struct {
	percent int    // the target in force: a GOGC value, or -1 for off
	fromEnv bool   // GOGC's, which the runtime applied at start; --gc-percent is ignored
	warning string // a problem the operator should know of, or ""
}

// decideGCPercent chooses between --gc-percent (flag, already
// validated) and the GOGC environment variable (gogc, "" when unset).
// limited says whether a soft memory limit is in force. An explicit GOGC
// that the runtime understands wins, as an explicit GOMEMLIMIT wins over
// --memory-limit-ratio: the runtime has applied it already. One it does
// not understand (the runtime then uses 100) gives way to the flag, with
// a warning.
func decideGCPercent(flag int, gogc string, limited bool) gcTarget {
	if gogc == "" {
		return gcTarget{percent: flag}
	}
	percent := -1
	if gogc != "off" {
		// As the runtime reads GOGC (runtime.readGOGC); a negative
		// value turns the target off, as "off" does.
		n, err := strconv.ParseInt(gogc, 10, 32)
		if err != nil {
			return gcTarget{percent: flag, warning: fmt.Sprintf(
				"GOGC=%q is not understood (the Go runtime takes a whole number or \"off\"), so --gc-percent=%d applies instead", gogc, flag)}
		}
		percent = max(int(n), -1)
	}
	t := gcTarget{percent: percent, fromEnv: true}
	if percent < 0 && !limited {
		t.warning = "GOGC=" + gogc + " turns the garbage collector's target off and there is no soft memory limit (no GOMEMLIMIT, and none from the container's): " +
			"the heap grows without bound until the kernel or the container kills fluxd. Set GOMEMLIMIT, run fluxd in a container with a memory limit, or unset GOGC"
	}
	return t
}

// applyGCPercent sets the collector's target from --gc-percent unless
// GOGC is set (decideGCPercent), and says in the log which applied.
func applyGCPercent(flag int, limited bool, log *slog.Logger) {
	log = log.With("component", "memory")
	gogc := os.Getenv("GOGC")
	t := decideGCPercent(flag, gogc, limited)
	if t.warning != "" {
		log.Warn(t.warning)
	}
	if t.fromEnv {
		log.Info("garbage collector target from GOGC; --gc-percent is ignored", "gogc", gogc)
		return
	}
	debug.SetGCPercent(t.percent)
	log.Info("garbage collector target from --gc-percent", "gc_percent", t.percent)
}
