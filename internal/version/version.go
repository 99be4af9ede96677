// Package version holds the build version of fluxd and fluxctl, set at
// link time with -ldflags "-X github.com/fluxd/fluxd/internal/version.Version=...".
package version

import "runtime/debug"

// Version is the build version; "dev" unless set at link time.
var Version = "dev"

// String returns Version, or the module version when built with go install.
func String() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return Version
}
