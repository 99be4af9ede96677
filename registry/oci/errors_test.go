package oci

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"

	"github.com/fluxd/fluxd/internal/fluxerr"
)

func TestRegistryErrorsNameTheRegistry(t *testing.T) {
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ggcrregistry.New())
	host := strings.TrimPrefix(srv.URL, "http://")
	_, err = c.Images(context.Background(), host+"/missing")
	if fluxerr.KindOf(err) != fluxerr.Missing || !strings.Contains(err.Error(), host) {
		t.Errorf("missing repository: %v (kind %v)", err, fluxerr.KindOf(err))
	}
	srv.Close()
	_, err = c.Images(context.Background(), host+"/app")
	if fluxerr.KindOf(err) != fluxerr.Unavailable || !strings.Contains(err.Error(), "cannot reach registry "+host) {
		t.Errorf("unreachable registry: %v", err)
	}
	deny := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Basic realm="x"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer deny.Close()
	_, err = c.Images(context.Background(), strings.TrimPrefix(deny.URL, "http://")+"/app")
	if !strings.Contains(err.Error(), "refused access") {
		t.Errorf("401: %v", err)
	}
}
