package oci

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/fluxd/fluxd/internal/fluxerr"
)

// cause says what a registry request's failure was, for a caller: the
// HTTP status a registry answered (and its error codes, such as
// MANIFEST_UNKNOWN), or the network's or TLS's failure. It never carries
// what the registry wrote in its answer's body, nor its error messages:
// those are the registry's words, and the host may be anything a
// workload names, an internal service included. The whole error goes to
// the debug log instead (logCause).
func cause(err error) string {
	var te *transport.Error
	if errors.As(err, &te) {
		s := fmt.Sprintf("HTTP %d %s", te.StatusCode, http.StatusText(te.StatusCode))
		var codes []string
		for _, d := range te.Errors {
			if c := string(d.Code); c != "" && len(codes) < 4 && safeCode(c) {
				codes = append(codes, c)
			}
		}
		if len(codes) > 0 {
			s += " (" + strings.Join(codes, ", ") + ")"
		}
		return s
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, errTagListTooBig):
		var pe *pagesError
		if errors.As(err, &pe) {
			return pe.Error()
		}
		return errTagListTooBig.Error()
	}
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &ua), errors.As(err, &hn), errors.As(err, &ci):
		return "its TLS certificate is not trusted (x509)"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		// "dial tcp 10.0.0.1:443: connect: connection refused": the
		// network's words, not the registry's.
		return op.Error()
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Error()
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return "it answers plain HTTP where TLS was asked for"
	}
	if strings.Contains(err.Error(), "first record does not look like a TLS handshake") {
		return "it does not speak TLS"
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return "timed out"
	}
	return "its answer could not be used (fluxd's debug log has the details)"
}

// safeCode says whether an error code is a registry's code word (upper
// case letters and underscores), not free text.
func safeCode(c string) bool {
	if len(c) > 40 {
		return false
	}
	for _, r := range c {
		if (r < 'A' || r > 'Z') && r != '_' {
			return false
		}
	}
	return true
}

// registryError is a registry request's failure as callers see it: the
// host and what failed, without the registry's own words. It unwraps to
// the transport's error, so that callers can still tell a status code.
type registryError struct {
	host  string
	cause string
	err   error
}

func (e *registryError) Error() string { return "registry " + e.host + ": " + e.cause }
func (e *registryError) Unwrap() error { return e.err }

// errTagListTooBig is a tag list beyond the client's caps.
var errTagListTooBig = errors.New("the tag list is larger than fluxd reads")

// pagesError is a tag list longer than MaxTagPages pages.
type pagesError struct{ max int }

func (e *pagesError) Error() string {
	return fmt.Sprintf("the tag list has more than %d pages", e.max)
}

func (e *pagesError) Unwrap() error { return errTagListTooBig }

// explain turns a registry error into one that names the registry and
// says what to check. A refusal names the source of the credentials
// fluxd offered (never the credentials), or says it offered none.
func (c *Client) explain(repository string, repo name.Repository, err error) error {
	host := repo.RegistryStr()
	// Callers see the host and the status, never the registry's body.
	c.cfg.Log.Debug("registry request failed", "component", "registry", "registry", host, "repository", repository, "error", err)
	safe := &registryError{host: host, cause: cause(err), err: err}
	if errors.Is(err, errTagListTooBig) {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("reading the tags of %s: %w", repository, safe),
			fmt.Sprintf("fluxd reads at most %d pages and %d MiB of a repository's tag list, so that a registry cannot hold it with an endless list. Remove old tags from the repository, or raise the caps (--registry-max-tag-pages, --registry-max-tag-list-bytes).", c.cfg.MaxTagPages, c.cfg.MaxTagListBytes>>20))
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return c.refused(host, repository, repo, safe)
		case http.StatusNotFound:
			return fluxerr.New(fluxerr.Missing, fmt.Errorf("repository %s was not found on registry %s", repository, host),
				"Check the image name for typos; the repository may also be private to credentials fluxd does not have.")
		case http.StatusTooManyRequests:
			return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("registry %s is rate-limiting fluxd (%s)", host, safe.cause), "Wait and try again, or give fluxd credentials with a higher pull limit.")
		}
	}
	msg := err.Error()
	if strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "i/o timeout") || strings.Contains(msg, "dial tcp") {
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd cannot reach registry %s for %s: %w", host, repository, safe),
			"This is fluxd's own request to the registry, not your connection to fluxd. Check the registry's address in the image reference, that it is up, and that fluxd's network can reach it.")
	}
	return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("fluxd's request to registry %s for %s failed: %w", host, repository, safe),
		"This is fluxd's own request to the registry, not your connection to fluxd. The registry's full answer is in fluxd's log at debug level.")
}

// refused explains a 401 or 403.
func (c *Client) refused(host, repository string, repo name.Repository, err error) error {
	source, asked := c.chain.source(repo.Name())
	switch {
	case asked && source != "":
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("the registry %s refused the credentials from %s for %s: %w", host, source, repository, err),
			"Check that these credentials are current (not a rotated password or an expired token) and that they may pull this repository. Secrets and the --registry-credentials file are read again after a refusal, so correcting them needs no restart; --docker-config is read when fluxd starts.")
	case asked:
		return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("the registry %s refused access to %s, and fluxd has no credentials for it: %w", host, repository, err),
			"Give fluxd credentials for this registry: --registry-secret NAMESPACE/NAME (a dockerconfigjson Secret), --registry-credentials FILE or --docker-config; or imagePullSecrets on the workloads that run this repository's images (they serve only those images).")
	}
	return fluxerr.New(fluxerr.Unavailable, fmt.Errorf("the registry %s refused access to %s: %w", host, repository, err),
		"Check the credentials for this registry (--registry-secret, --registry-credentials, --docker-config, or the workloads' imagePullSecrets), and that they may pull this repository.")
}

func unauthorized(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden)
}
