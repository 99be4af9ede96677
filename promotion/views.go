package promotion

import "time"

// What fluxctl and the page read of a pipeline (through the daemon's
// Promotions interface, served by the Controller).

// StageStatus is one stage of a pipeline, as `fluxctl stages` shows it.
type StageStatus struct {
	Pipeline string
	Stage    string
	From     string
	Services []string
	// Current is the bundle the stage runs (or is rolling out to),
	// with its state here; nil before its first bundle.
	Current *Record
	// Waiting are bundles waiting here: awaiting approval, or verified
	// in From and not taken yet (Hold says why not).
	Waiting []Record
	// Gates, for Current: checks passed of all, soak left, and the
	// approvals the stage asks for.
	ChecksPassed, Checks int
	SoakLeft             time.Duration
	Approvals            int
	// Paused is set while a person holds automatic promotion into the
	// stage; Locked is a locked service's reason.
	Paused *Pause
	Locked string
	// Hold says why the newest verified bundle of From is not being
	// promoted here, when it is not.
	Hold string
	// Away says why this fluxd does not step the stage, when it does
	// not: its services run in another cluster (whose fluxd shares the
	// store and steps it), or it is split between clusters (refused).
	// Hold says it too, for 'fluxctl stages'.
	Away string
}

// BundleStatus is one bundle and its state in every stage it reached.
type BundleStatus struct {
	Bundle Bundle
	// Stages are its records, in the pipeline's stage order.
	Stages []Record
}

// PromoteRequest asks to promote a bundle into a stage by hand.
type PromoteRequest struct {
	Pipeline string
	Stage    string
	// Bundle is the bundle's ID or a unique prefix of it; empty means
	// the newest bundle verified in the stage's from-stage.
	Bundle string
	// User is who asks, recorded as the promotion's author.
	User string
	// Force promotes a bundle not verified in the from-stage (an admin's
	// choice, recorded as such).
	Force bool
}
