package localstack

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

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
