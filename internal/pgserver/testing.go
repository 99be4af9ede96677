package pgserver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// One server per test binary, started by the first test that asks for a
// database and stopped by RunTests; each test gets a database of its own.
var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
	databases  atomic.Int64
)

// RunTests runs a package's tests and then stops the shared server:
// call it from TestMain.
func RunTests(m *testing.M) int {
	code := m.Run()
	StopShared()
	return code
}

// StopShared stops the shared server, if a test started it: for a
// TestMain that cannot use RunTests.
func StopShared() {
	if shared != nil {
		_ = shared.Stop()
	}
}

// Database returns the URL (without password) of a new, empty database
// on the test binary's shared server, and the server (its Password and
// PasswordFile). It skips the test under -short: PostgreSQL takes a few
// seconds to start. A missing server is a failure, not a skip: CI installs
// it (hack/deps.sh).
func Database(t testing.TB) (string, *Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a PostgreSQL server; skipped under -short")
	}
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		shared, sharedErr = Start(ctx, Options{})
	})
	if sharedErr != nil {
		t.Fatalf("starting PostgreSQL: %v", sharedErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := shared.CreateDatabase(ctx, fmt.Sprintf("test_%d", databases.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return url, shared
}

// Own starts a server for one test (one it may stop and restart), stopped
// when the test ends. It skips under -short like Database.
func Own(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a PostgreSQL server; skipped under -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}
