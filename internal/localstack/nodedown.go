package localstack

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// teardownNode stops the real node recorded under stackDir (node/node.json)
// and removes what it leaves in the machine: the pods' processes, the
// containerd shims (which outlive containerd by design), the mounts
// (volumes, container root filesystems, network namespaces), the bridge and
// the cgroups. It is a no-op for a stack without a real node, and safe to
// call twice.
func teardownNode(stackDir string) error {
	b, err := os.ReadFile(filepath.Join(stackDir, "node", "node.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var n nodeState
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("reading %s: %w", filepath.Join(stackDir, "node", "node.json"), err)
	}
	pids, err := readPIDs(stackDir)
	if err != nil {
		return err
	}
	stop := func(name string) {
		if pid, ok := pids[name]; ok {
			stopPID(pid, 10*time.Second)
			_ = os.Remove(filepath.Join(stackDir, "pids", name+".pid"))
			_ = os.Remove(filepath.Join(stackDir, "pids", name+".exe"))
		}
	}
	// The kubelet first: it would start again what is killed below.
	stop("kubelet")
	var errs []error
	if err := killCgroup(n.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	stop("containerd")
	killShims(n.socket())
	if err := unmountUnder(n.Dir, n.RunDir); err != nil {
		errs = append(errs, err)
	}
	if n.Bridge != "" {
		if _, err := os.Stat("/sys/class/net/" + n.Bridge); err == nil {
			if out, err := exec.Command("ip", "link", "delete", n.Bridge).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("deleting the bridge %s: %v: %s", n.Bridge, err, out))
			}
		}
	}
	if err := removeCgroups(n.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	if strings.HasPrefix(n.RunDir, "/run/fluxd-node-") {
		if err := os.RemoveAll(n.RunDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cgroupDirs are the directories of root under every mounted cgroup
// hierarchy (v1 controllers and the v2 one).
func cgroupDirs(root string) []string {
	if root == "" || root == "/" {
		return nil
	}
	var out []string
	hier, _ := filepath.Glob("/sys/fs/cgroup/*")
	hier = append(hier, "/sys/fs/cgroup")
	for _, h := range hier {
		d := filepath.Join(h, root)
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

// makeCgroups creates root under every mounted cgroup v1 hierarchy.
func makeCgroups(root string) error {
	hier, err := filepath.Glob("/sys/fs/cgroup/*")
	if err != nil {
		return err
	}
	for _, h := range hier {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue // not a hierarchy
		}
		if err := os.MkdirAll(filepath.Join(h, root), 0o755); err != nil {
			return fmt.Errorf("creating the real node's cgroup: %w", err)
		}
	}
	return nil
}

// killCgroup kills every process in root's cgroups, in every hierarchy,
// until none is left.
func killCgroup(root string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		for _, d := range cgroupDirs(root) {
			_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						left++
					}
				}
				return nil
			})
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes left in the cgroup %s after SIGKILL", root)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeCgroups removes root's cgroup directories, deepest first.
func removeCgroups(root string) error {
	var errs []error
	for _, d := range cgroupDirs(root) {
		var dirs []string
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, p := range dirs {
			if err := syscall.Rmdir(p); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}

// killShims kills the containerd shims serving the containerd at socket:
// they are started apart from containerd, to outlive its restarts.
func killShims(socket string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || !strings.Contains(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		for i, a := range args {
			if a == "-address" && i+1 < len(args) && args[i+1] == socket {
				if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
					stopPID(pid, 2*time.Second)
				}
				break
			}
		}
	}
}

// unmountUnder detaches every mount point under the given directories,
// deepest first.
func unmountUnder(dirs ...string) error {
	var errs []error
	for round := 0; round < 3; round++ {
		mps, err := mountsUnder(dirs...)
		if err != nil {
			return err
		}
		if len(mps) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, mp := range mps {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points under dirs, deepest first.
func mountsUnder(dirs ...string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if d != "" && strings.HasPrefix(mp, strings.TrimSuffix(d, "/")+"/") {
				out = append(out, mp)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, sc.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// NodeLeftovers lists what a stopped stack's real node left in the
// machine: mounts under its directories, its bridge, its cgroups and
// processes of its shims. 'make down' must leave it empty.
func NodeLeftovers(stackDir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(stackDir, "node", "node.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var n nodeState
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, err
	}
	mps, err := mountsUnder(n.Dir, n.RunDir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, mp := range mps {
		out = append(out, "mount "+mp)
	}
	if _, err := os.Stat("/sys/class/net/" + n.Bridge); err == nil {
		out = append(out, "bridge "+n.Bridge)
	}
	for _, d := range cgroupDirs(n.CgroupRoot) {
		out = append(out, "cgroup "+d)
	}
	return out, nil
}
