package oci

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/fluxerr"
)

// endlessRegistry answers tag lists without end: pages that always link
// a next one, or one body that never ends.
func endlessRegistry(t *testing.T, endlessBody bool) (string, *atomic.Int64) {
	t.Helper()
	pages := &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/" {
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/tags/list") {
			http.NotFound(w, r)
			return
		}
		n := pages.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if !endlessBody {
			w.Header().Set("Link", fmt.Sprintf(`</v2/team/app/tags/list?n=2&last=t%d>; rel="next"`, n))
			fmt.Fprintf(w, `{"name":"team/app","tags":["t%d","u%d"]}`, n, n)
			return
		}
		_, _ = io.WriteString(w, `{"name":"team/app","tags":[`)
		chunk := []byte(strings.Repeat(`"1.0.0",`, 1024))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), pages
}

// A registry that pages without end, or sends a body without end, holds
// no scan: the list fails at the caps, saying so.
func TestTagListsAreCapped(t *testing.T) {
	for _, tc := range []struct {
		name        string
		endlessBody bool
		want        string
	}{
		{"pages without end", false, "more than 5 pages"},
		{"a body without end", true, "larger than fluxd reads"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host, pages := endlessRegistry(t, tc.endlessBody)
			c, err := New(Config{MaxTagPages: 5, MaxTagListBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err = c.Tags(ctx, host+"/team/app")
			if err == nil || !strings.Contains(err.Error(), tc.want) || fluxerr.KindOf(err) != fluxerr.Unavailable {
				t.Fatalf("Tags: %v, want an Unavailable error with %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "registry "+host) || !strings.Contains(err.Error(), "--registry-max-tag-pages") {
				t.Fatalf("the error does not name the registry and what to do: %v", err)
			}
			if !tc.endlessBody && pages.Load() != 5 {
				t.Fatalf("read %d pages, want the cap, 5", pages.Load())
			}
		})
	}
}
