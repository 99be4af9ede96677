// Package promotion moves what passed one stage of a pipeline on to the
// next: dev to staging to prod, with gates in between.
//
// A Pipeline (apiVersion fluxd.io/v1, kind Pipeline) lives in git under
// --git-path; fluxd reads it and never applies it. It names ordered
// stages, each with its services and the stage it takes bundles from.
//
// A Bundle is what a stage's services ran once their release rolled out:
// each image's repository, tag and digest. It is immutable and named by
// a hash of its content (its ID), so every replica and every cluster
// names it alike.
//
// Each bundle has a state in each stage it reached, one small machine per
// (bundle, stage), advanced by Advance with an injected time:
//
//	            approvals < N                 all approvals
//	(candidate) ──────────────▶ AwaitingApproval ──────────┐
//	     │ auto, or promoted by hand                       │
//	     ▼                                                 ▼
//	  Promoted ── rolled out ──▶ Verifying ── checks pass ──▶ Soaking ── soak over ──▶ Verified
//	     │                         │ a check or the rollout fails                 │
//	     └─────────────────────────┴────────────▶ Failed ◀── (never promoted on) ─┘
//
//	Any state but Failed and Verified ── a newer bundle is promoted over it ──▶ Superseded
//	(a soaking bundle is not superseded: it soaks on its own, see Advance)
//
// Next decides, for a whole pipeline at once, what each stage should do:
// promote the newest bundle verified in its from-stage, wait for
// approvals, hold (paused by a person, or a service locked), or roll back
// to its last verified bundle when a gate failed and the stage asks for
// it. It is a plain function over the records, so a test, a replica and a
// restarted fluxd all reach the same decision from the same store.
//
// The package never holds a git repository, and imports no adapter:
// promotions are release specs that go through the release engine's one
// checked commit path, and gates that reach outside (HTTP, Prometheus,
// Kubernetes Jobs) are adapters wired in by cmd/fluxd.
//
// Status: the types, the Pipeline reader and the state machine are
// built and tested; the wiring into fluxd (the store's tables, the
// release engine, the gates' adapters, fluxctl and the page) is not yet,
// and fluxd does not read Pipelines today. docs/promotion.md says so.
package promotion
