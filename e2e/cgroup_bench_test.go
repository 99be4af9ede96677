package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A memory cgroup for one fluxd, as its container would give it: the
// kernel holds it to the limit (reclaiming page cache, then killing),
// and fluxd sees the cgroup at /sys/fs/cgroup/memory, where
// internal/memlimit reads its limit. The stack's real node runs
// containers under the same cgroup v1 hierarchy; this runs fluxd as a
// process so the bench can sample it from outside, without a container
// image of the bench's build. Root only (the stack runs as root).

// memoryV1 is the cgroup v1 memory hierarchy.
const memoryV1 = "/sys/fs/cgroup/memory"

// canLimitMemory says whether inMemoryCgroup can work here.
func canLimitMemory() error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (a memory cgroup, and a mount namespace for fluxd)")
	}
	if _, err := os.Stat(filepath.Join(memoryV1, "memory.limit_in_bytes")); err != nil {
		return fmt.Errorf("no cgroup v1 memory hierarchy at %s (cgroup v2 alone is not supported by this bench): %w", memoryV1, err)
	}
	return nil
}

type memoryCgroup struct{ dir string }

// inMemoryCgroup makes the cgroup name limited to limit bytes, and a
// script, written in dir, that runs bin in it with the cgroup mounted
// where a container's is: its own mount namespace binds the cgroup's
// directory over the hierarchy's root. unshare execs in place, so the
// script's PID is fluxd's.
//
// charge copies the binary from inside the cgroup first, so that its
// pages in the page cache are charged to the cgroup: as a container's
// are when the node evicted them and the container reads them again.
// Without it they are charged where the stack's copy was first read, as
// a freshly pulled image's are to containerd's cgroup, which unpacked it.
func inMemoryCgroup(name string, limit int64, bin, dir string, charge bool) (*memoryCgroup, string, error) {
	cg := &memoryCgroup{dir: filepath.Join(memoryV1, name)}
	if err := os.Mkdir(cg.dir, 0o755); err != nil && !os.IsExist(err) {
		return nil, "", fmt.Errorf("making the memory cgroup: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cg.dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		_ = cg.remove()
		return nil, "", fmt.Errorf("setting the memory cgroup's limit: %w", err)
	}
	script := filepath.Join(dir, "fluxd-in-cgroup")
	run, cp := bin, ""
	if charge {
		run = filepath.Join(dir, "fluxd")
		cp = fmt.Sprintf("cp %s %s || exit 1\n", shellQuote(bin), shellQuote(run))
	}
	body := fmt.Sprintf(`#!/bin/sh
echo $$ > %[1]s/cgroup.procs || exit 1
%[4]sexec unshare --mount --propagation private /bin/sh -c 'mount --bind "$0" %[2]s && exec "$@"' %[1]s %[3]s "$@"
`, shellQuote(cg.dir), memoryV1, shellQuote(run), cp)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		_ = cg.remove()
		return nil, "", err
	}
	return cg, script, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

type cgroupStats struct {
	peakMB            float64
	failcnt, oomKills int64
}

func (cg *memoryCgroup) stats() cgroupStats {
	read := func(f string) int64 {
		b, _ := os.ReadFile(filepath.Join(cg.dir, f))
		n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n
	}
	st := cgroupStats{peakMB: float64(read("memory.max_usage_in_bytes")) / (1 << 20), failcnt: read("memory.failcnt")}
	b, _ := os.ReadFile(filepath.Join(cg.dir, "memory.oom_control"))
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "oom_kill "); ok {
			st.oomKills, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return st
}

// remove deletes the cgroup once its processes are gone.
func (cg *memoryCgroup) remove() error {
	if err := os.Remove(cg.dir); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing the memory cgroup %s: %w", cg.dir, err)
	}
	return nil
}
