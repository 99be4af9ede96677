package oci

import (
	"net/http"
	"strconv"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Transport is the client's transport below go-containerregistry's: its
// per-host rate limits, and the request metrics
// (fluxd_registry_requests_total). Another reader of the same registries
// (verify/cosign, for signatures) sends through it, so that its requests
// are limited and counted with the client's own.
func (c *Client) Transport() http.RoundTripper { return c.limiter }

// SignatureTransport is Transport for signature (and attestation)
// lookups (verify/cosign): limited and counted with every other request,
// and counted apart too (fluxd_registry_signature_requests_total), so
// that what verification costs is seen.
func (c *Client) SignatureTransport() http.RoundTripper {
	if c.cfg.Metrics == nil {
		return c.limiter
	}
	return signatureTransport{c.limiter, c.cfg.Metrics}
}

type signatureTransport struct {
	next    http.RoundTripper
	metrics *Metrics
}

func (t signatureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	status := "error"
	if err == nil {
		status = strconv.Itoa(resp.StatusCode)
	}
	t.metrics.sigs.WithLabelValues(req.URL.Host, req.Method, status).Inc()
	return resp, err
}

// Keychain is the client's credentials, every source in order, as the
// client finds them for a repository.
func (c *Client) Keychain() authn.Keychain { return c.chain }
