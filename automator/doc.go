// Package automator releases new images by itself, for every service whose
// manifest in git carries the annotation fluxd.io/automated: "true".
//
// Each automated service is a small state machine; a state function runs
// and returns the next state:
//
//	          refresh                 newer image
//	Empty ─────────────▶ UpToDate ────────────────▶ Releasing
//	                        │  ▲                        │ release done or failed
//	  no release needed     │  │ timeout                ▼
//	   (wait long, 1m)      └─▶ Waiting ◀───────────────┘ (wait short, 15s)
//
//	UpToDate or Waiting ── no longer automated ──▶ gone (forgotten)
//
// A service the plan refuses (fluxd does not watch its namespace, or may
// not patch it) is UpToDate for RefusedWait (10m), and kicks do not end
// that wait: only the cluster's RBAC or fluxd's --namespaces can change
// the answer.
//
// One loop drives every service: Step runs the state functions of the
// services whose time has come and returns when the next one is due, so
// tests drive the machine with an injected clock and no sleeps. Releases
// go through the release engine, as user "automator", recorded as
// automated releases in the history of the instance that automated the
// service (fluxd.io/automated-by).
package automator
