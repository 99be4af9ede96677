package oci

import (
	"context"
	"errors"
	"net/http"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/registry"
)

// HeadDigest reads the digest ref (repository:tag) has in its registry
// now, with one manifest HEAD, whatever the cache holds; "" when the
// registry has no such tag. It is the digest a scan records (the tag's
// manifest or index). A promotion asks it to tell that each tag still
// names the digest that was verified: the cache never reads a version
// tag's digest again, so a version pushed twice would go unseen.
func (c *Client) HeadDigest(ctx context.Context, ref string) (string, error) {
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return "", fluxerr.New(fluxerr.User, registry.BadRef(ref, err), "")
	}
	desc, err := c.puller.Load().Head(ctx, tag)
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
			return "", nil
		}
		return "", c.explain(tag.Context().String(), tag.Context(), err)
	}
	return desc.Digest.String(), nil
}
