package kubesync

import "github.com/fluxd/fluxd/internal/fielddiff"

// fieldDiff lists how merged (what applying git would leave) differs from
// live, one line per changed field (internal/fielddiff, which the status
// page's manifest view shares). Secrets come masked from ssa.Diff.
func fieldDiff(live, merged map[string]any) []string { return fielddiff.Lines(live, merged) }
