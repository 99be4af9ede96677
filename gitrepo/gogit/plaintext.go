package gogit

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// plaintext reports whether a remote URL is read without TLS or SSH
// (http://, git://) from a host other than this machine's, and whether
// it carries credentials.
func plaintext(raw string) (remote, creds bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "git") {
		return false, false
	}
	return !loopbackHost(u.Hostname()), u.User != nil
}

// loopbackHost says whether host is this machine.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkPlaintext refuses a plaintext remote on another host unless
// allowed: whoever is on the network path could serve any manifests,
// which fluxd would apply with its own rights.
func checkPlaintext(raw string, allow bool) error {
	remote, _ := plaintext(raw)
	if !remote || allow {
		return nil
	}
	return fmt.Errorf("--git-url %s is plaintext (%s://) to another host: anyone on the network path could change the manifests fluxd applies; use https:// or SSH, or pass --git-allow-insecure to accept the risk", Redact(raw), strings.SplitN(raw, ":", 2)[0])
}

// PlaintextWarning is what fluxd logs at start about a plaintext remote
// (http://, git://), or "": credentials sent in clear are always warned
// about, loopback or not, allowed or not.
func PlaintextWarning(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "git") {
		return ""
	}
	remote, creds := plaintext(raw)
	switch {
	case creds:
		return "the git remote's credentials are sent in plaintext (" + u.Scheme + "://): anyone on the network path can read them; use https://"
	case remote:
		return "the git remote is plaintext (" + u.Scheme + "://, allowed by --git-allow-insecure): anyone on the network path could change the manifests fluxd applies"
	}
	return ""
}
