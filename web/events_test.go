package web

import (
	"bufio"
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// changingTokens is a tokens file an admin edits while streams are open.
type changingTokens struct {
	mu  sync.Mutex
	ids map[string]auth.Identity
}

func (c *changingTokens) Authenticate(tok string) (auth.Identity, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := c.ids[tok]; ok {
		return id, nil
	}
	return auth.Identity{}, auth.ErrUnknownToken
}

func (c *changingTokens) set(tok string, id *auth.Identity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == nil {
		delete(c.ids, tok)
		return
	}
	c.ids[tok] = *id
}

// An open event stream follows the tokens file: when an instance's scope
// is narrowed to another namespace, its open stream gets the
// notifications of the new scope, not of the old (whose repositories are
// no longer its business); when its token is revoked, the stream ends
// with signedout at its next event. The stream judged every event by the
// identity it was opened with, for as long as it stayed open.
func TestEventStreamFollowsTheTokensFile(t *testing.T) {
	toks := &changingTokens{ids: map[string]auth.Identity{
		"fxd_team": {Instance: "c", Role: auth.Viewer, Scope: &auth.Scope{Namespaces: []string{"c"}}},
	}}
	conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hub := NewHub(16)
	h, err := New(context.Background(), Config{Auth: toks, Conn: conn, Hub: hub})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp := openEvents(t, srv, "fxd_team", "")
	readEvents(t, resp, 1) // hello
	inNamespace := func(ns string) func(auth.Identity) bool {
		return func(id auth.Identity) bool { return id.Scope.Contains(ns, "") }
	}

	// The scope moves from c to d.
	toks.set("fxd_team", &auth.Identity{Instance: "c", Role: auth.Viewer, Scope: &auth.Scope{Namespaces: []string{"d"}}})
	time.Sleep(reauthEvery + 100*time.Millisecond)
	hub.PublishTo(inNamespace("c"), "notify", &fluxdv1.ImageNotification{Repository: "reg/c-app"})
	hub.PublishTo(inNamespace("d"), "notify", &fluxdv1.ImageNotification{Repository: "reg/d-app"})
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			if !strings.Contains(line, "reg/d-app") {
				t.Errorf("after the scope moved to d, the open stream got %s, want only reg/d-app", line)
			}
			break
		}
	}

	// The token is revoked: the next event ends the stream.
	toks.set("fxd_team", nil)
	time.Sleep(reauthEvery + 100*time.Millisecond)
	hub.PublishTo(inNamespace("d"), "notify", &fluxdv1.ImageNotification{Repository: "reg/d-app:2"})
	var got []string
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "event: ") || strings.HasPrefix(line, "data: ") {
			got = append(got, line)
			if strings.HasPrefix(line, "data: ") {
				break
			}
		}
	}
	if len(got) == 0 || got[0] != "event: signedout" {
		t.Errorf("after the token was revoked, the open stream got %q, want signedout", got)
	}
}

// The event stream sends a caller only its instance's events (and
// notifications, which are everyone's), and a stream resumed with
// Last-Event-ID gets what it missed; an unknown ID gets a reset.
func TestEventsAreInstancesOwnAndResumable(t *testing.T) {
	srv, hub := newTestServer(t)
	resp := openEvents(t, srv, "fxd_viewer", "")
	hello := readEvents(t, resp, 1)
	if len(hello) != 1 || !strings.HasPrefix(hello[0], "hello ") {
		t.Fatalf("first event %v, want hello", hello)
	}
	hub.Publish("b", "job", &fluxdv1.Job{Id: "theirs"})
	hub.Publish("a", "job", &fluxdv1.Job{Id: "ours"})
	hub.Publish("", "notify", &fluxdv1.ImageNotification{Repository: "r/app"})
	got := readEvents(t, resp, 2)
	if len(got) != 2 || !strings.HasPrefix(got[0], "job ") || !strings.HasPrefix(got[1], "notify ") {
		t.Fatalf("events %v, want our job then the notification", got)
	}
	resp.Body.Close()

	// Missed while away: resumed from the job's ID.
	hub.Publish("a", "log", &fluxdv1.JobLogLine{Text: "missed"})
	jobID := strings.Fields(got[0])[1]
	again := readEvents(t, openEvents(t, srv, "fxd_viewer", jobID), 2)
	if len(again) != 2 || !strings.HasPrefix(again[0], "notify ") || !strings.HasPrefix(again[1], "log ") {
		t.Errorf("resumed events %v, want the notification and the missed log line", again)
	}
	reset := readEvents(t, openEvents(t, srv, "fxd_viewer", "0000-1"), 1)
	if len(reset) != 1 || !strings.HasPrefix(reset[0], "reset ") {
		t.Errorf("a stream resumed from another process's ID: %v, want reset", reset)
	}
}
