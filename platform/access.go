package platform

import "errors"

// Errors of a workload fluxd will not release, whatever git says: a
// release, the automator and list-services tell them apart by these.
var (
	// ErrNotWatched is a workload in a namespace fluxd does not watch
	// (outside its --namespaces): it could apply it, perhaps, but never
	// see it roll out.
	ErrNotWatched = errors.New("fluxd does not watch the workload's namespace")
	// ErrForbidden is a workload fluxd's credentials may not apply (patch)
	// in its namespace: the RBAC that would let it is not bound there.
	ErrForbidden = errors.New("fluxd may not apply the workload")
)
