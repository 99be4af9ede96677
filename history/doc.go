// Package history records every action fluxd takes, keyed by instance, so
// that each tenant sees only its own records. Adapters: history/sqlite
// (default); PostgreSQL later.
//
// Not built yet: see the README's feature table ([core] issue).
package history
