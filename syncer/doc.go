// Package syncer keeps the cluster equal to git: on every new commit, on
// every interval (drift correction) and when asked, it reads every object
// under the manifest paths (plain files and kustomize builds), has them
// applied in dependency order, prunes what left git when allowed, and
// records each sync that changed something or failed in the history.
//
// It never fetches git on its own schedule: it reads the clone the
// release engine keeps, under the engine's git lock, and is kicked when
// any fetch (the poller's, the automator's, a listing's) finds a new
// commit. Releases and the sync apply as the same field manager, so a
// release's fast path (apply right after its push) and the next sync
// agree, and neither undoes the other.
//
// Run is the loop; Sync is one pass, callable from a test.
package syncer
