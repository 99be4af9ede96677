package gogit

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/githttp"
)

// A remote that stops answering fails fetches after --git-timeout instead
// of holding fluxd; a caller waiting for the clone gives up with its own
// context; the stall shows in Status; work resumes when the remote does.
func TestStalledRemote(t *testing.T) {
	_, bare := newRemote(t)
	gitCLI(t, bare, "config", "http.receivepack", "true")
	srv := githttp.Serve(t, filepath.Dir(bare), githttp.Options{})
	ctx := context.Background()
	r, err := Open(ctx, Config{URL: srv.URL + "/remote.git", Branch: "prod", User: "fluxd", Email: "f@f", Dir: filepath.Join(t.TempDir(), "clone"), Timeout: 3 * time.Second}) // generous: git http-backend forks per request, slow on a loaded machine
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}

	srv.Stalled.Store(true)
	done := make(chan error, 1)
	go func() { _, err := r.Sync(ctx); done <- err }()
	// While that fetch hangs, another caller waits for the clone only as
	// long as its context allows.
	time.Sleep(100 * time.Millisecond)
	if st := r.Status(); st.Waiting != "fetching" {
		t.Errorf("status while stalled = %+v; want a fetch waiting", st)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = r.Sync(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second caller during the stall got %v; want its own deadline", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the stalled fetch ended with %v; want the git timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stalled fetch did not end at the git timeout")
	}
	if st := r.Status(); st.Error == "" || st.ErrorSince.IsZero() || st.Waiting != "" {
		t.Errorf("status after the timeout = %+v; want the error, nothing waiting", st)
	}

	srv.Stalled.Store(false)
	commit, err := commitAndPush(ctx, r, base, map[string][]byte{"deploy/app.yaml": []byte("image: a:3\n")}, "Release a:3", gitrepo.Signature{Name: "carol"})
	if err != nil {
		t.Fatalf("after the remote recovered: %v", err)
	}
	if got := gitCLI(t, bare, "rev-parse", "prod"); got != commit {
		t.Errorf("remote prod = %s, want %s", got, commit)
	}
	if st := r.Status(); st.Error != "" || st.Revision != commit || st.LastSync.IsZero() {
		t.Errorf("status after recovery = %+v", st)
	}
}
