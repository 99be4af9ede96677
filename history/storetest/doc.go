// Package storetest is the contract every history.Store must keep: the
// same tests, run by each adapter's own test file against a real database
// (a SQLite file, a PostgreSQL server), so that fluxd behaves the same on
// either. A new kind of record adds its tests to the table in Run.
package storetest
