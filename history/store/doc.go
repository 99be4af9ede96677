// Package store opens the history.Store a --history-db value names: a
// SQLite file (a path or sqlite:///path, the default, for one replica)
// or a PostgreSQL database (postgres://... or postgresql://..., for
// several replicas or records kept off the node). For the daemon it also
// waits out a database that is not up yet, retrying with backoff while
// fluxd reports not ready, instead of exiting.
package store
