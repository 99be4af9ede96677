// Package gogit keeps fluxd's working clone of the manifests repository,
// with go-git: clone, fetch (on an interval and on demand), and commit and
// push of edited files. A push that fails leaves the clone as it was
// before the commit, so nothing half-done stays behind.
//
// Files by verb: repo.go (Config, Repo, New, Open, the network guard),
// clone.go (the first clone, retried), sync.go (fetch and reset), write.go
// (Commit and Push), commits.go (reading history: Commits, FindCommit),
// snapshot.go (read-only trees of a revision), ssh.go and sshdial.go (SSH
// auth and host keys). URL redaction is internal/giturl's. Each test file
// is named after the file it tests (helpers in repo_test.go).
package gogit
