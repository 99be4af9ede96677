package main

import (
	"testing"

	"github.com/fluxd/fluxd/internal/clidocs"
)

// TestCLIReference keeps docs/cli.md equal to what the commands say of
// themselves; `make docs` (go test -run TestCLIReference -update) rewrites it.
func TestCLIReference(t *testing.T) {
	root, _ := newRootCommand()
	clidocs.CheckGolden(t, root, "../../docs/cli.md", "fluxctl command reference",
		"Every fluxctl command with its flags, generated from the commands themselves. "+
			"Each global flag can also be set by its environment variable (`FLUX_URL`, `FLUX_TOKEN`, ...). "+
			"For a guided tour see [workflow.md](workflow.md).", *update)
}
