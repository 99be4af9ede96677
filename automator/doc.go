// Package automator releases new images by itself, one goroutine per
// service, under the service's policies (automated, locked, tag filters).
// Each service is a state machine whose state functions return the next
// state:
//
//	Empty → UpToDate → Releasing → UpToDate
//	                 ↘ Waiting (locked, or a release failed) → UpToDate
//
// Not built yet: see the README's feature table ([core] issue).
package automator
