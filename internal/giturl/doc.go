// Package giturl tells which git URLs are reached over SSH, for fluxd and
// for 'fluxctl install' alike, and takes the credentials out of a git URL
// (Redact) or out of an error that quotes one (RedactError) before either
// reaches a message or a log.
//
// fluxd reaches git with go-git, whose transport.NewEndpoint decides the
// protocol; fluxctl must not import go-git (its dependency boundary), so
// the same rules are written here, and gitrepo/gogit's tests check that
// this package and go-git agree on a table of URLs. fluxd's IsSSH is this
// one, so the two cannot drift apart.
package giturl
