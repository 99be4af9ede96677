// Package history records every action fluxd takes, keyed by instance, so
// that each tenant sees only its own records. It names the domain types;
// the storage adapter is history/sqlite (PostgreSQL later).
package history
