package web

import (
	"fmt"
	"net/url"
)

// ValidateGitWebURL checks --git-web-url: an http(s) URL prefix such that
// PREFIX/COMMIT is the forge's page of a commit, e.g.
// https://github.com/org/repo/commit. The page shows it to every signed-in
// user, so it may carry no credentials.
func ValidateGitWebURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--git-web-url %q is not an http(s) URL: give the prefix of your forge's commit pages, such that PREFIX/COMMIT is a commit's page (e.g. https://github.com/org/repo/commit or https://gitlab.example.com/group/repo/-/commit)", s)
	}
	if u.User != nil {
		return fmt.Errorf("--git-web-url carries credentials (user:password@): the page shows this URL to every signed-in user; give it without them, as a browser reaches the forge")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--git-web-url %q has a query or fragment: the commit is appended as PREFIX/COMMIT, so give a plain path prefix", s)
	}
	return nil
}
