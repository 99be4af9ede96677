// Package history records every action fluxd takes, keyed by instance, so
// that each tenant sees only its own records. It names the domain types;
// Store says what a storage adapter provides: history/sqlite (one file,
// one replica) or history/postgres (a server several replicas share);
// history/store opens the one a --history-db URL names.
package history
