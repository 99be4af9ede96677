package localstack

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one component the stack started.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed when the process exits (attached mode only)
	err     error
}

// spawn starts a component with its output in logs/NAME.log and its PID in
// pids/NAME.pid. In attached mode the process dies with this one; in
// detached mode it is left running for StopDir.
func (s *Stack) spawn(name, path string, args ...string) (*process, error) {
	logPath := filepath.Join(s.Dir, "logs", name+".log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = s.Dir
	// Its own process group, so stopping it also stops anything it forks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !s.detach {
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	pidFile := filepath.Join(s.Dir, "pids", name+".pid")
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return nil, err
	}
	// Its program beside its PID, so that readPIDs knows a PID that is
	// no longer its (the stack outlived by a reboot, or the process
	// gone and its number given to another).
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)); err == nil {
		_ = os.WriteFile(strings.TrimSuffix(pidFile, ".pid")+".exe", []byte(exe+"\n"), 0o644)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	s.procs = append(s.procs, p)
	return p, nil
}

// died returns an error naming the process and the tail of its log if it
// has exited, or nil while it runs.
func (p *process) died() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited (%v); the end of %s:\n%s", p.name, p.err, p.logPath, tail(p.logPath, 15))
	default:
		return nil
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// stop stops p and what it forked (its process group): SIGTERM, then
// SIGKILL after grace. It returns once they are gone.
//
// Unlike stopPID it never signals p's PID once p has been reaped: tests
// kill components themselves (a fluxd by SIGKILL), and the stack stops
// them again at the end. By then the PID may be another process's: PIDs
// wrap at 32,768 on this machine and three test shards fork fast. A CI run
// lost a test's fluxctl that way, to a SIGTERM meant for a fluxd killed
// minutes before.
//
// The kernel keeps a PID's number while a process group of that ID has
// members, so what p forked is still stopped through its group, as long
// as no process holds the number itself: one that does means p's group
// is gone and the number was handed out again, maybe to the leader of
// another group (every component here leads its own). What remains is the
// moment between that check and the signal.
func (p *process) stop(grace time.Duration) {
	pid := p.cmd.Process.Pid
	ownGroup := func() bool { return !pidInUse(pid) && groupLives(pid) }
	signal := func(sig syscall.Signal) {
		select {
		case <-p.exited:
			if ownGroup() {
				_ = syscall.Kill(-pid, sig)
			}
		default:
			// Not reaped yet, so pid is p's (or its zombie's).
			_ = syscall.Kill(-pid, sig)
			_ = p.cmd.Process.Signal(sig)
		}
	}
	gone := func() bool {
		select {
		case <-p.exited:
			return !ownGroup()
		default:
			return false
		}
	}
	signal(syscall.SIGTERM)
	for deadline := time.Now().Add(grace); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if gone() {
			return
		}
	}
	signal(syscall.SIGKILL)
	for i := 0; i < 100 && !gone(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// pidInUse reports whether a process or thread has the ID pid.
func pidInUse(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// groupLives reports whether a live process is in process group pgid.
func groupLives(pgid int) bool { return groupMembers(pgid) > 0 }

// groupMembers counts the live (not zombie) processes in process group
// pgid.
func groupMembers(pgid int) int {
	n := 0
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// After the parenthesised command name: state, ppid, pgrp.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) >= 3 && fields[0] != "Z" && fields[2] == strconv.Itoa(pgid) {
			n++
		}
	}
	return n
}

// RecordedPID returns the PID recorded under dir for the component name,
// while that process runs and runs the program recorded with it
// (readPIDs): a number safe to signal.
func RecordedPID(dir, name string) (int, bool) {
	pids, err := readPIDs(dir)
	if err != nil {
		return 0, false
	}
	pid, ok := pids[name]
	return pid, ok && alive(pid)
}

// stopPID stops the process group of pid: SIGTERM, then SIGKILL after
// grace. It returns once the process is gone. It is for PIDs read from
// files ('make down'); a process this stack started is stopped with
// process.stop, which knows when its PID is no longer its own.
func stopPID(pid int, grace time.Duration) {
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && alive(pid); i++ {
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid runs and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// readPIDs returns the PIDs recorded under dir/pids, by component name.
func readPIDs(dir string) (map[string]int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		if !runsRecordedProgram(strings.TrimSuffix(f, ".pid")+".exe", pid) {
			// The number is another program's now: never signal it.
			continue
		}
		out[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
	}
	return out, nil
}

// runsRecordedProgram reports whether pid runs the program recorded in
// exeFile (spawn), or may: a record or a process this one cannot read
// (gone, or another user's) leaves the PID to the callers' alive checks,
// as before there were records. A program rebuilt in place while it
// runs still counts as its own.
func runsRecordedProgram(exeFile string, pid int) bool {
	want, err := os.ReadFile(exeFile)
	if err != nil {
		return true
	}
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return true
	}
	return strings.TrimSuffix(got, " (deleted)") == strings.TrimSpace(string(want))
}

// stopOrder stops dependents before what they depend on.
var stopOrder = []string{"fluxd", "kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "registry"}

// NotRunning lists the components of a stack under dir that have no live
// process, so a caller can tell a whole stack from a partial one.
func NotRunning(dir string) ([]string, error) {
	pids, err := readPIDs(dir)
	if err != nil {
		return nil, err
	}
	names := stopOrder
	if FluxdPodNamespace(dir) != "" {
		// fluxd runs in a pod: the real node's processes instead.
		names = append([]string{"kubelet", "containerd"}, stopOrder[1:]...)
	}
	var missing []string
	for _, name := range names {
		if pid, ok := pids[name]; !ok || !alive(pid) {
			missing = append(missing, name)
		}
	}
	return missing, nil
}

// Running lists the components recorded under dir (by 'make up') whose
// process still runs, in stop order, then any others by name.
func Running(dir string) ([]string, error) {
	pids, err := readPIDs(dir)
	if err != nil {
		return nil, err
	}
	var up []string
	for _, name := range stopOrder {
		if pid, ok := pids[name]; ok && alive(pid) {
			up = append(up, name)
		}
		delete(pids, name)
	}
	var rest []string
	for name, pid := range pids {
		if alive(pid) {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	return append(up, rest...), nil
}

// StopDir stops every component recorded under dir (by 'make up') and
// removes their PID files. It is safe to call when nothing runs.
func StopDir(dir string) ([]string, error) {
	pids, err := readPIDs(dir)
	if err != nil {
		return nil, err
	}
	var stopped []string
	if pid, ok := pids["fluxd"]; ok && alive(pid) {
		stopPID(pid, 10*time.Second)
		stopped = append(stopped, "fluxd")
	}
	for _, name := range []string{"kubelet", "containerd"} {
		if pid, ok := pids[name]; ok && alive(pid) {
			stopped = append(stopped, name)
		}
	}
	nodeErr := teardownNode(dir)
	if pids, err = readPIDs(dir); err != nil {
		return stopped, err
	}
	stop := func(name string, pid int) {
		if alive(pid) {
			stopPID(pid, 10*time.Second)
			stopped = append(stopped, name)
		}
		_ = os.Remove(filepath.Join(dir, "pids", name+".pid"))
		_ = os.Remove(filepath.Join(dir, "pids", name+".exe"))
	}
	for _, name := range stopOrder {
		if pid, ok := pids[name]; ok {
			stop(name, pid)
			delete(pids, name)
		}
	}
	for name, pid := range pids {
		stop(name, pid)
	}
	if nodeErr != nil {
		return stopped, fmt.Errorf("stopping the real node: %w", nodeErr)
	}
	return stopped, nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr returns a free loopback host:port.
func FreeAddr() (string, error) {
	p, err := freePort()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

var errTimeout = errors.New("timed out")
