// Package gates runs a promotion stage's checks: the adapters behind
// promotion.Checker that reach outside fluxd. New returns one Checker
// that runs whichever kind a promotion.Check sets:
//
//   - http (http.go): a GET that must answer 2xx within the check's
//     timeout, tried again up to its retries, its interval apart;
//   - job (job.go): a Kubernetes Job made from the check's template in
//     the stage's namespace, which passes when the Job completes and
//     fails with its pod's reason;
//   - prometheus (prometheus.go): a PromQL instant query whose every
//     sample must compare with the threshold; no sample fails.
//
// A check's error is the reason a person reads in `fluxctl stages` and
// the history: what was asked, what answered, what to look at. It does
// not name the check (the promotion loop does), and it never shows a
// URL's credentials or query string (internal/giturl redacts them).
//
// The URLs come from the Pipeline in git, written by whoever may write
// the manifests fluxd applies: fluxd fetches them with the same trust it
// gives those manifests, and adds no guard against where they point.
//
// gates sits beside cmd/fluxd, which wires it into the promotion loop;
// it imports promotion and platform, and nothing imports it but the
// binary.
package gates
