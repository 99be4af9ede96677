package localstack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Running names only the recorded components whose process lives: a
// brand-new or cleanly stopped stack has none, so 'make up' says nothing
// about a partial stack.
func TestRunning(t *testing.T) {
	dir := t.TempDir()
	if got, err := Running(dir); err != nil || len(got) != 0 {
		t.Fatalf("no .stack/pids: Running = %v, %v; want nothing", got, err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "pids"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, pid := range map[string]int{"etcd": os.Getpid(), "kwok": dead.Process.Pid, "postgres": os.Getpid(), "fluxd": os.Getpid()} {
		if err := os.WriteFile(filepath.Join(dir, "pids", name+".pid"), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Running(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"fluxd", "etcd", "postgres"}, got); diff != "" {
		t.Errorf("Running (-want +got):\n%s", diff)
	}
}

// A component the stack started is stopped with what it forked, and once
// it has exited and been reaped its PID is never signalled again: by then
// it may be a stranger's (a CI run lost a test's fluxctl to a SIGTERM
// meant for a fluxd a test had killed minutes before).
func TestStopSignalsOnlyItsOwnProcesses(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"logs", "pids"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &Stack{Dir: dir}
	waitExited := func(p *process) {
		t.Helper()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not exit", p.name)
		}
	}

	t.Run("running, with a child", func(t *testing.T) {
		p, err := s.spawn("parent", "/bin/sh", "-c", "sleep 60 & wait")
		if err != nil {
			t.Fatal(err)
		}
		pid := p.cmd.Process.Pid
		waitGroupSize(t, pid, 2)
		p.stop(5 * time.Second)
		waitExited(p)
		if groupLives(pid) {
			t.Fatalf("process group %d still has members after stop", pid)
		}
	})

	t.Run("exited, its child left", func(t *testing.T) {
		p, err := s.spawn("orphaning", "/bin/sh", "-c", "sleep 60 & exit 0")
		if err != nil {
			t.Fatal(err)
		}
		pid := p.cmd.Process.Pid
		waitExited(p)
		if !groupLives(pid) {
			t.Fatalf("the orphaned sleep is not in group %d", pid)
		}
		p.stop(5 * time.Second)
		if groupLives(pid) {
			t.Fatalf("process group %d still has members after stop", pid)
		}
	})

	// The stranger holds the PID a reaped component is made to have:
	// the leader of a group of its own, as every component here is, whose
	// ID is that number; or a process in this test's own group.
	for _, tc := range []struct {
		name    string
		setpgid bool
	}{{"exited, its PID now another group's leader", true}, {"exited, its PID now a stranger's", false}} {
		t.Run(tc.name, func(t *testing.T) {
			stranger := exec.Command("sleep", "60")
			stranger.SysProcAttr = &syscall.SysProcAttr{Setpgid: tc.setpgid}
			if err := stranger.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = stranger.Process.Kill(); _ = stranger.Wait() })
			exited := make(chan struct{})
			close(exited)
			p := &process{name: "reaped", cmd: &exec.Cmd{Process: stranger.Process}, exited: exited}
			p.stop(time.Second)
			if err := stranger.Process.Signal(syscall.Signal(0)); err != nil || !alive(stranger.Process.Pid) {
				t.Fatalf("stop of a reaped component signalled the process that now has its PID, or its group: %v", err)
			}
		})
	}
}

// waitGroupSize waits until process group pgid has n live members.
func waitGroupSize(t *testing.T, pgid, n int) {
	t.Helper()
	for range 200 {
		if groupMembers(pgid) == n {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("process group %d never had %d members", pgid, n)
}

// A PID file whose number now runs another program (the stack outlived by
// a reboot, or its process gone and the number handed out again) is not
// read as the component's: 'make down' and 'make restart-fluxd' never
// signal it.
func TestReadPIDsDropsANumberRunningAnotherProgram(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"logs", "pids"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &Stack{Dir: dir}
	p, err := s.spawn("etcd", "/bin/sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(time.Second) })
	pids, err := readPIDs(dir)
	if err != nil || pids["etcd"] != p.cmd.Process.Pid {
		t.Fatalf("readPIDs = %v, %v; want etcd at %d", pids, err, p.cmd.Process.Pid)
	}
	// The number now another program's: this test's own process.
	if err := os.WriteFile(filepath.Join(dir, "pids", "etcd.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pids, err := readPIDs(dir); err != nil || len(pids) != 0 {
		t.Fatalf("readPIDs = %v, %v; want nothing: PID %d runs another program than the recorded one", pids, err, os.Getpid())
	}
	if got, err := Running(dir); err != nil || len(got) != 0 {
		t.Fatalf("Running = %v, %v; want nothing", got, err)
	}
}
