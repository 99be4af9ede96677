package main

import (
	"net/http"
	"testing"
)

// The webhook and metrics listeners bound every phase of a request, so a
// slow client cannot hold connections: not only the headers.
func TestHTTPServersBoundEveryPhase(t *testing.T) {
	t.Parallel()
	srv := newHTTPServer(http.NotFoundHandler())
	for name, d := range map[string]int64{
		"ReadHeaderTimeout": int64(srv.ReadHeaderTimeout),
		"ReadTimeout":       int64(srv.ReadTimeout),
		"WriteTimeout":      int64(srv.WriteTimeout),
		"IdleTimeout":       int64(srv.IdleTimeout),
	} {
		if d <= 0 {
			t.Errorf("%s is not set", name)
		}
	}
}
