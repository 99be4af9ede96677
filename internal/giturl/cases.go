package giturl

// Cases are git URLs and whether each is an SSH remote as go-git (and
// git) read them: the table fluxd's and 'fluxctl install”s tests check
// themselves against.
var Cases = map[string]bool{
	"ssh://git@github.com/org/repo.git":        true,
	"ssh://git@host:2222/org/repo.git":         true,
	"ssh://host/repo.git":                      true,
	"git@github.com:org/repo.git":              true,
	"github.com:org/repo.git":                  true,
	"user:tok@host:org/r.git":                  true,
	"git@host:2222:org/r.git":                  true,
	"host:repo":                                true,
	"https://github.com/org/repo.git":          false,
	"https://user:tok@github.com/org/repo.git": false,
	"http://host:8080/r.git":                   false,
	"file:///srv/git/r.git":                    false,
	"/srv/git/r.git":                           false,
	"./relative:path":                          false,
	"/abs/with:colon/file":                     false,
	"git+ssh://git@host/r.git":                 false,
	"git://host/r.git":                         false,
	"":                                         false,
	"repo.git":                                 false,
}
