// Package sqlite is the SQLite adapter of package history: one file, in WAL
// mode, with versioned schema migrations (goose, embedded SQL). Every row
// carries the instance ID, and every query filters on it.
package sqlite
