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

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
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
