package oci

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"go.uber.org/goleak"
)

// A registry that stalls one repository's manifests: that scan fails
// after its timeout, the other repository's scan is not held up, and no
// goroutine is left behind.
func TestStalledRepositoryTimesOutAlone(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var stall atomic.Bool
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stall.Load() && strings.Contains(r.URL.Path, "/stuck/manifests/") {
			<-r.Context().Done() // never answers
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	push(t, host+"/stuck:1.0.0", imageAt(t, time.Now(), nil))
	push(t, host+"/good:1.0.0", imageAt(t, time.Now(), nil))
	stall.Store(true)

	c, err := New(Config{RequestTimeout: 200 * time.Millisecond, ScanTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stuck := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Images(context.Background(), host+"/stuck")
		stuck <- err
	}()
	time.Sleep(50 * time.Millisecond) // the stuck scan is under way
	imgs, err := c.Images(context.Background(), host+"/good")
	if err != nil || len(imgs) != 1 {
		t.Errorf("the good repository, beside a stalled one: %v %v", imgs, err)
	}
	select {
	case err := <-stuck:
		if err == nil {
			t.Errorf("the stalled scan succeeded")
		}
		if !strings.Contains(err.Error(), host) {
			t.Errorf("the stalled scan's error does not name the registry: %v", err)
		}
		t.Logf("stalled scan ended after %v: %v", time.Since(start).Round(10*time.Millisecond), err)
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled scan never ended")
	}
	if st := c.Status(host + "/stuck"); st.Refreshing || st.LastError == "" {
		t.Errorf("status after the stall: %+v", st)
	}
}
