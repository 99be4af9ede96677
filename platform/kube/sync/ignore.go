package kubesync

import (
	"fmt"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
)

// Flux v1's fluxcd.io/ignore, as Flux v1 honoured it: "true" on an object
// in git, or on the object in the cluster, leaves it out of the sync (not
// applied, not pruned); "sync_only" (or "true") in the cluster keeps it
// from being pruned once it leaves git.

// ignoredInGit is why the sync leaves an object git annotates with
// ignore "true" alone, or "".
func ignoredInGit(annotations map[string]string) string {
	if v, key := policy.FluxIgnore(annotations); v == "true" {
		return fmt.Sprintf("not applied: %s: \"true\" in git (Flux v1's ignore); remove the annotation to sync it again", key)
	}
	return ""
}

// leaveIgnored takes out of stage the items whose object in the cluster
// is annotated ignore "true" (read by classify from the live metadata),
// marking them skipped; they stay in the inventory as they were.
func leaveIgnored(stage []*item) []*item {
	kept := stage[:0]
	for _, it := range stage {
		if it.liveIgnore != "" {
			it.res.Action = platform.ActionSkipped
			it.res.Error = fmt.Sprintf("not applied: %s: \"true\" on the object in the cluster (Flux v1's ignore); remove it there to sync it again", it.liveIgnore)
			continue
		}
		kept = append(kept, it)
	}
	return kept
}

// notPrunedIgnored is why an object that left git, annotated ignore in
// the cluster, is not pruned, or "".
func notPrunedIgnored(annotations map[string]string) string {
	if v, key := policy.FluxIgnore(annotations); v != "" {
		return fmt.Sprintf("not pruned: %s: %q (Flux v1's ignore) on the object in the cluster", key, v)
	}
	return ""
}
