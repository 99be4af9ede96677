// Package history records every action fluxd takes, keyed by instance, so
// that each tenant sees only its own records. It names the domain types;
// Store says what a storage adapter provides: history/sqlite (one file,
// one replica) or history/postgres (a server several replicas share);
// history/store opens the one a --history-db URL names.
//
// It also keeps the promotion package's state (Promotions: bundles,
// their state per stage, and paused stages) as store-neutral rows whose
// content is promotion's JSON, since history sits below promotion. Those
// rows are keyed by pipeline, not by instance: the fluxds of several
// clusters sharing one PostgreSQL database run the stages of one
// pipeline, and must read and write the same rows.
package history
