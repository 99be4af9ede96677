// Package webhook serves registries' push notifications (POST /v1/notify
// on --webhook-listen): the transport of an image notification, apart from
// what a notification does, which is the daemon's (Refresher).
//
// A request goes, in call order:
//
//   - handler.go: the route, then the sender's proof: the shared secret
//     (signature.go), or a signature over a body read under the limits of
//     limits.go (a share per sender, slots kept for known signers);
//   - forward.go: a follower passes an authenticated notification on to
//     the leader, over replica TLS; the leader takes it only with a
//     replica certificate;
//   - payloads.go: the pushed images, from Docker Hub's, the CNCF
//     distribution registry's, Harbor's or Quay's payload;
//   - queue.go: each repository a watched service runs is queued once
//     (client-go's workqueue coalesces per repository, wired by
//     cmd/fluxd), answered 202 at once, and refreshed by Run's workers
//     through the Refresher.
//
// approve.go serves CI's approvals of promotion bundles (POST
// /v1/approve): signed as notifications are, with a timestamp always,
// under the same limits (signed.go holds the proof and the limits both
// share), and passed to the promotion loop through Approver.
package webhook
