// Package gogit keeps fluxd's working clone of the manifests repository,
// with go-git: clone, fetch (on an interval and on demand), and commit and
// push of edited files. A push that fails leaves the clone as it was
// before the commit, so nothing half-done stays behind.
package gogit
