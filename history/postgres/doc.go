// Package postgres keeps fluxd's history, jobs and registry cache in a
// PostgreSQL server (pgx v5 and its pool), so that several replicas, each
// with a state directory of its own, share one record. The schema and the
// behaviour are history/sqlite's, checked by the same contract tests
// (history/storetest).
package postgres
