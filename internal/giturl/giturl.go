package giturl

import (
	"net/url"
	"regexp"
	"strings"
)

var (
	// hasScheme and scpLike are go-git's (internal/url, v5.19), which
	// follow git's own (Documentation/urls.adoc, connect.c).
	hasScheme = regexp.MustCompile(`^[^:]+://`)
	scpLike   = regexp.MustCompile(`^(?:(?P<user>[^@]+)@)?(?P<host>[^:\s]+):(?:(?P<port>[0-9]{1,5}):)?(?P<path>[^\\].*)$`)
)

// IsSSH reports whether raw is an SSH remote: ssh://[user@]host[:port]/path
// or the scp-like [user@]host:path (where no '/' comes before the first
// ':', which git reads as a local path).
func IsSSH(raw string) bool {
	if !hasScheme.MatchString(raw) {
		if !scpLike.MatchString(raw) {
			return false
		}
		before, _, _ := strings.Cut(raw, ":")
		return !strings.Contains(before, "/")
	}
	u, err := url.Parse(raw)
	return err == nil && u.IsAbs() && u.Scheme == "ssh"
}
