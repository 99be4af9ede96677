// Package notify tells people what fluxd did: it reads the outbox of the
// history store (history.Outbox: a notice per recorded event, written in
// the event's transaction, and one per release that began rolling out)
// and delivers each notice to the receivers of a config file: signed JSON
// webhooks, Slack, Microsoft Teams and Discord messages, and commit
// statuses on GitHub, GitLab and Gitea.
//
// Each receiver has a cursor in the store: the last notice it was given.
// A Sender delivers to each receiver in order, one notice at a time, and
// moves the cursor only once the receiver took the notice (at least once:
// every request carries X-Fluxd-Event-Id so that a receiver can drop a
// duplicate). It runs on the leader only; a new leader reads the cursors
// and goes on where the old one stopped. Nothing but one page of notices
// per receiver is held in memory, however long a receiver is down; a
// notice older than MaxAge is dropped and counted instead of delivered.
//
// The layers: cmd/fluxd wires a Watcher (the config file, re-read when it
// changes) and a Sender (over the store) and runs the Sender while it
// leads; release and syncer know nothing of notify.
package notify
