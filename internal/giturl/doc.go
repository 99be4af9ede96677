// Package giturl tells which git URLs are reached over SSH, for fluxd and
// for 'fluxctl install' alike.
//
// fluxd reaches git with go-git, whose transport.NewEndpoint decides the
// protocol; fluxctl must not import go-git (its dependency boundary), so
// the same rules are written here, and gitrepo/gogit's tests check that
// this package and go-git agree on a table of URLs. fluxd's IsSSH is this
// one, so the two cannot drift apart.
package giturl
