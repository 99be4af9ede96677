// Package check says what fluxd understands of a repository's
// configuration, offline: for each service, which tool's dialect it is
// written in, the policy fluxd reads from it (automation, lock, tag
// filters, pinned digests), and what fluxd cannot honour. fluxctl check
// prints it before a team switches to fluxd.
//
// It reads with the parsers fluxd itself uses (gitrepo, policy), so what
// it says is what fluxd will do. Each format is a Reader that returns
// Services; a new format (Flux v2 image automation, HelmRelease values)
// plugs in as one more Reader in Readers.
package check
