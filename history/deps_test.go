package history_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The domain packages name what a store does; the drivers stay in the
// adapters (history/sqlite, history/postgres) and history/store, which
// only cmd wires in. This keeps it so.
func TestDomainImportsNoDatabase(t *testing.T) {
	forbidden := []string{"github.com/mattn/go-sqlite3", "github.com/jackc/pgx", "github.com/fluxd/fluxd/history/sqlite", "github.com/fluxd/fluxd/history/postgres", "github.com/fluxd/fluxd/history/store"}
	for _, pkg := range []string{".", "../release", "../release/jobs", "../automator", "../daemon"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
