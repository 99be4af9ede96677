package oci

import (
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
)

// Transport is the client's transport below go-containerregistry's: its
// per-host rate limits, and the request metrics
// (fluxd_registry_requests_total). Another reader of the same registries
// (verify/cosign, for signatures) sends through it, so that its requests
// are limited and counted with the client's own.
func (c *Client) Transport() http.RoundTripper { return c.limiter }

// Keychain is the client's credentials, every source in order, as the
// client finds them for a repository.
func (c *Client) Keychain() authn.Keychain { return c.chain }
