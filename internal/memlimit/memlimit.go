package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultRatio is the share of the container's limit given to the Go
// runtime. The rest (205 MiB of 512Mi) is for what the runtime does not
// count but the cgroup charges: the pages of fluxd's binary (60-86 MiB of
// RSS in BenchmarkScale), SQLite's C allocations, and the page cache of
// the git clone and the database. Measured at 10,000 workloads in a real
// memory cgroup of 512Mi (BENCH_SCALE_MEMLIMIT=cgroup, the binary's pages
// charged to it): 0.75 took the cgroup to its limit (8,891 reclaims on a
// quiet machine; 4.5 million, and list-services' p99 at 26 s, beside a CI
// run), 0.6 peaked at 471 MiB with no reclaim, at the same latency and
// about the same GC CPU.
const DefaultRatio = 0.6

// CgroupRoot is where the container's cgroup is mounted: with cgroup v2
// (and its namespace) the container's own cgroup, with v1 a directory per
// controller, the container's own mounted at memory/.
const CgroupRoot = "/sys/fs/cgroup"

// noLimitV1 is the least value cgroup v1 reports as "no limit": it
// reports math.MaxInt64 rounded down to the page size.
const noLimitV1 = int64(1) << 62

// Source says where the soft limit came from.
type Source string

const (
	FromEnv       Source = "GOMEMLIMIT"         // explicit; left as the runtime applied it
	FromContainer Source = "container"          // ratio × the cgroup's limit
	None          Source = "none"               // no container limit found: the runtime's default (no soft limit)
	Disabled      Source = "disabled (ratio 0)" // --memory-limit-ratio=0
)

// Decision is what Apply did, for fluxd's start-up log.
type Decision struct {
	Source    Source
	Container int64 // the container's limit in bytes; 0 when none was read
	Soft      int64 // the soft limit in bytes now set; 0 when none
}

// Container returns the memory limit of the cgroup under root (CgroupRoot
// in production): v2's memory.max, else v1's memory/memory.limit_in_bytes.
// ok is false when neither file exists or the limit is "max" (v2) or
// v1's "unlimited".
func Container(root string) (limit int64, ok bool, err error) {
	for _, name := range []string{"memory.max", filepath.Join("memory", "memory.limit_in_bytes")} {
		path := filepath.Join(root, name)
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("reading the container's memory limit from %s: %w", path, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n <= 0 {
			return 0, false, fmt.Errorf("reading the container's memory limit from %s: %q is neither a number of bytes nor \"max\"; "+
				"the cgroup file is not what this fluxd expects: set GOMEMLIMIT (for example GOMEMLIMIT=460MiB) or --memory-limit-ratio=0 to start without it", path, s)
		}
		if n >= noLimitV1 {
			return 0, false, nil
		}
		return n, true, nil
	}
	return 0, false, nil
}

// Soft is the soft limit for a container limit of container bytes.
func Soft(container int64, ratio float64) int64 {
	return int64(math.Floor(float64(container) * ratio))
}

// ValidateRatio checks a --memory-limit-ratio.
func ValidateRatio(ratio float64) error {
	if math.IsNaN(ratio) || ratio < 0 || ratio > 1 {
		return fmt.Errorf("--memory-limit-ratio=%v: the share of the container's memory limit fluxd's Go runtime aims to stay under is between 0 and 1 (0.6 leaves the rest for memory Go does not count but the container's cgroup charges, such as the binary's pages and the page cache; 0 turns it off)", ratio)
	}
	return nil
}

// Apply sets the runtime's soft memory limit to ratio × the limit of the
// cgroup under root, unless GOMEMLIMIT is set (the runtime applied it at
// start) or ratio is 0.
func Apply(root string, ratio float64) (Decision, error) {
	if err := ValidateRatio(ratio); err != nil {
		return Decision{}, err
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		soft := debug.SetMemoryLimit(-1)
		if soft == math.MaxInt64 {
			soft = 0
		}
		return Decision{Source: FromEnv, Soft: soft}, nil
	}
	if ratio == 0 {
		return Decision{Source: Disabled}, nil
	}
	limit, ok, err := Container(root)
	if err != nil || !ok {
		return Decision{Source: None}, err
	}
	soft := Soft(limit, ratio)
	debug.SetMemoryLimit(soft)
	return Decision{Source: FromContainer, Container: limit, Soft: soft}, nil
}
