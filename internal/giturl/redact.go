package giturl

import (
	"net/url"
	"regexp"
	"strings"
)

// Redact replaces the password or token in a URL, for messages and logs.
// A lone user name is replaced too, since it is often a token. A URL that
// does not parse keeps only what cannot be a credential. An SSH URL's
// lone user name (git@host:path) is shown: SSH authenticates with the key.
func Redact(raw string) string {
	if IsSSH(raw) && !strings.ContainsAny(raw, "?#") {
		if info, _, ok := cutUserInfo(raw); !ok || !strings.Contains(info, ":") {
			return strings.Map(printable, raw)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return redactUnparsed(raw)
	}
	if u.Opaque != "" {
		// "user:token@host:path" parses as the scheme "user" and the
		// opaque rest.
		if at := strings.LastIndex(u.Opaque, "@"); at >= 0 {
			return "redacted@" + u.Opaque[at+1:]
		}
		return raw
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted" // ?private_token=... and the like
	}
	if u.User == nil {
		return u.String()
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "redacted")
	} else {
		u.User = url.User("redacted")
	}
	return u.String()
}

// redactUnparsed shows what follows the user info of a URL that does not
// parse, or nothing but its scheme when where the user info ends cannot
// be told: the parse may have failed inside a password.
func redactUnparsed(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		scheme, rest = "", raw
	} else {
		scheme += "://"
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "redacted@" + strings.Map(printable, rest[at+1:]) + " (unparseable URL)"
	}
	if ok {
		return scheme + "… (unparseable URL)"
	}
	return "(unparseable URL)"
}

func printable(r rune) rune {
	if r < ' ' || r == 0x7f {
		return '?'
	}
	return r
}

// quoted matches what Go's errors quote with %q.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// RedactError is err's message with raw's credentials taken out: the
// errors of url.Parse and transport.NewEndpoint quote the URL, or parts
// of it such as a "port" that is really a password.
func RedactError(raw string, err error) string {
	msg := strings.ReplaceAll(err.Error(), raw, Redact(raw))
	msg = quoted.ReplaceAllString(msg, "(not shown)")
	msg = strings.TrimPrefix(msg, "parse (not shown): ")
	for _, secret := range secrets(raw) {
		msg = strings.ReplaceAll(msg, secret, "redacted")
	}
	return msg
}

// cutUserInfo splits raw at the last "@" after its scheme.
func cutUserInfo(raw string) (info, rest string, ok bool) {
	_, after, found := strings.Cut(raw, "://")
	if !found {
		after = raw
	}
	at := strings.LastIndex(after, "@")
	if at < 0 {
		return "", after, false
	}
	return after[:at], after[at+1:], true
}

// secrets are the strings of raw that may be credentials: its user info
// (everything before the last "@" after the scheme), its parts around the
// first ":", and their unescaped forms.
func secrets(raw string) []string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		rest = raw
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return nil
	}
	info := rest[:at]
	user, pass, hasPass := strings.Cut(info, ":")
	if hasPass {
		user = "" // a user name beside a password is not the secret
	}
	var out []string
	for _, s := range []string{info, pass, user} {
		if s == "" {
			continue
		}
		out = append(out, s)
		if u, err := url.PathUnescape(s); err == nil && u != s {
			out = append(out, u)
		}
	}
	return out
}
