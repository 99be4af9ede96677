package main

import (
	"flag"
	"testing"

	"github.com/fluxd/fluxd/internal/clidocs"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/fluxd-flags.md")

// TestFlagReference keeps docs/fluxd-flags.md equal to fluxd's flags;
// `make docs` (go test -run TestFlagReference -update) rewrites it.
func TestFlagReference(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "") // a default that follows the pod's namespace
	clidocs.CheckGolden(t, newRootCommand(), "../../docs/fluxd-flags.md", "fluxd flag reference",
		"fluxd's flags and subcommands, generated from the flags themselves. "+
			"Where a default reads `$POD_NAMESPACE`, it is the pod's namespace in a cluster and `default` elsewhere. "+
			"For how to run fluxd see [install.md](install.md).", *updateDocs)
}
