package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fluxd/fluxd/history"
)

// testWebSessions: a session is read back after a reopen, ends when
// deleted or expired, one token keeps at most perToken (the oldest go),
// and no more than max are kept.
func testWebSessions(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	now := time.Now()
	se := func(id, tok string, age time.Duration, ttl time.Duration) history.WebSession {
		return history.WebSession{ID: id, TokenHash: tok, Sealed: []byte("sealed-" + id), CreatedAt: now.Add(-age), ExpiresAt: now.Add(ttl)}
	}
	save := func(w history.WebSession, perToken, limit int) bool {
		t.Helper()
		ok, err := s.SaveSession(ctx, w, perToken, limit)
		if err != nil {
			t.Fatalf("SaveSession(%s): %v", w.ID, err)
		}
		return ok
	}
	save(se("a", "t1", 3*time.Minute, time.Hour), 2, 10)
	save(se("b", "t1", 2*time.Minute, time.Hour), 2, 10)
	save(se("gone", "t2", time.Hour, -time.Minute), 2, 10) // expired already
	s = reopen()
	got, err := s.Session(ctx, "b")
	if err != nil || got.TokenHash != "t1" || string(got.Sealed) != "sealed-b" || !got.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("Session(b) = %+v, %v", got, err)
	}
	if _, err := s.Session(ctx, "gone"); !errors.Is(err, history.ErrNotFound) {
		t.Errorf("an expired session: %v, want ErrNotFound", err)
	}
	// A third session of t1: the oldest (a) ends.
	save(se("c", "t1", time.Minute, time.Hour), 2, 10)
	for id, want := range map[string]bool{"a": false, "b": true, "c": true} {
		_, err := s.Session(ctx, id)
		if (err == nil) != want {
			t.Errorf("after a third session of one token, Session(%s): %v; want kept %v", id, err, want)
		}
	}
	if err := s.DeleteSession(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, "b"); !errors.Is(err, history.ErrNotFound) {
		t.Errorf("a deleted session: %v", err)
	}
	// The bound on all sessions: c plus 2 more fit under 3.
	for i := range 2 {
		if !save(se(fmt.Sprint("m", i), fmt.Sprint("tok", i), 0, time.Hour), 5, 3) {
			t.Errorf("session m%d refused under the bound", i)
		}
	}
	if save(se("over", "tok9", 0, time.Hour), 5, 3) {
		t.Error("a session beyond the bound was saved")
	}
	if _, err := s.Session(ctx, "over"); !errors.Is(err, history.ErrNotFound) {
		t.Errorf("the refused session: %v", err)
	}
}
