package oci

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Defaults of the caps on one tag list: a registry may answer with an
// endless list (pages that always link a next one, or a body that never
// ends), which would otherwise hold a scan and its memory for good.
const (
	// DefaultMaxTagPages is 1,000 pages: a million tags at fluxd's page
	// size of 1,000.
	DefaultMaxTagPages = 1000
	// DefaultMaxTagListBytes is 64 MiB across the pages of one list
	// (10,000 tags are about 90 KB).
	DefaultMaxTagListBytes = 64 << 20
)

// listBudget is the bytes one tag list may still read, carried by the
// list's requests' context.
type listBudget struct{ left atomic.Int64 }

type listBudgetKey struct{}

func withListBudget(ctx context.Context, bytes int64) context.Context {
	b := &listBudget{}
	b.left.Store(bytes)
	return context.WithValue(ctx, listBudgetKey{}, b)
}

// capTransport cuts the body of a tag list answer off at its list's
// budget: the read fails with errTagListTooBig rather than filling
// memory.
type capTransport struct{ next http.RoundTripper }

func (t capTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp == nil || resp.Body == nil {
		return resp, err
	}
	b, ok := req.Context().Value(listBudgetKey{}).(*listBudget)
	if !ok || !strings.HasSuffix(req.URL.Path, "/tags/list") {
		return resp, nil
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, budget: b}
	return resp, nil
}

// CloseIdleConnections passes on to the transport below.
func (t capTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type cappedBody struct {
	io.ReadCloser
	budget *listBudget
}

func (c *cappedBody) Read(p []byte) (int, error) {
	left := c.budget.left.Load()
	if left <= 0 {
		return 0, errTagListTooBig
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.ReadCloser.Read(p)
	c.budget.left.Add(-int64(n))
	return n, err
}
