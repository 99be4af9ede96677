package daemon

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// lateTagImages lists a repository whose newest tag shows only from the
// reads'th read on (never, when reads is 0), as the distribution
// registry's list can lag its push notification.
type lateTagImages struct {
	mu           sync.Mutex
	reads, shows int
}

func (l *lateTagImages) Images(_ context.Context, repo string) ([]registry.Image, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	out := []registry.Image{{Repository: repo, Tag: "1.0.0"}}
	if l.shows > 0 && l.reads >= l.shows {
		out = append(out, registry.Image{Repository: repo, Tag: "1.0.1"})
	}
	return out, nil
}

// A notification of a tag the registry does not list yet reads the list
// again until it does (here on the third read), and only then wakes the
// automator; a tag that never shows is given up after the wait, with a
// warning, and nothing fails. A bare repository waits for nothing.
func TestNotifiedTagIsWaitedFor(t *testing.T) {
	for _, tc := range []struct {
		name, image string
		shows       int
		wantReads   int
		wantTags    int
		wantWarn    bool
	}{
		{"shows on the third read", "reg.example/app:1.0.1", 3, 3, 2, false},
		{"never shows", "reg.example/app:1.0.1", 0, 4, 1, true},
		{"listed at once", "reg.example/app:1.0.0", 0, 1, 1, false},
		{"a bare repository", "reg.example/app", 0, 1, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imgs := &lateTagImages{shows: tc.shows}
			var logs bytes.Buffer
			aut := &kickCounter{}
			deps := watching(imgs, "reg.example/app")
			deps.Automator = aut
			d := New(Config{}, deps, slog.New(slog.NewTextHandler(&logs, nil)))
			d.tagWait = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 3}
			repo, n, err := d.Notify(context.Background(), auth.Identity{Instance: "i", Role: auth.Deployer}, tc.image)
			if err != nil || repo != "reg.example/app" {
				t.Fatalf("Notify = %q, %v", repo, err)
			}
			if imgs.reads != tc.wantReads || n != tc.wantTags {
				t.Errorf("%d reads, %d tags; want %d reads, %d tags", imgs.reads, n, tc.wantReads, tc.wantTags)
			}
			if warned := strings.Contains(logs.String(), "does not show"); warned != tc.wantWarn {
				t.Errorf("warned %v, want %v:\n%s", warned, tc.wantWarn, logs.String())
			}
			if aut.kicks != 1 {
				t.Errorf("the automator was woken %d times, want once, after the reads", aut.kicks)
			}
		})
	}
}

// kickCounter is an automator that counts its kicks.
type kickCounter struct{ kicks int }

func (k *kickCounter) Kick()                                      { k.kicks++ }
func (k *kickCounter) Statuses() map[platform.ID]automator.Status { return nil }

// At most two notifications wait for their tags at once; a tag given up
// on is not waited for again for ten minutes; and the memory of given-up
// tags is bounded.
func TestTagWaitsAreBounded(t *testing.T) {
	var w tagWaits
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	doneA, okA := w.begin("r", "a", now)
	doneB, okB := w.begin("r", "b", now)
	if _, okC := w.begin("r", "c", now); !okA || !okB || okC {
		t.Fatalf("waits begun: %v %v %v; want two, not the third", okA, okB, okC)
	}
	doneA(false) // never showed
	doneB(true)  // showed
	if _, ok := w.begin("r", "a", now.Add(time.Minute)); ok {
		t.Error("a tag given up on a minute ago is waited for again")
	}
	doneB2, ok := w.begin("r", "b", now.Add(time.Minute))
	if !ok {
		t.Fatal("a tag that showed before is not waited for")
	}
	doneB2(true)
	doneA2, ok := w.begin("r", "a", now.Add(11*time.Minute))
	if !ok {
		t.Fatal("a tag given up on 11 minutes ago is still not waited for")
	}
	doneA2(true)
	for i := range maxGivenUp {
		done, ok := w.begin("r", fmt.Sprint("x", i), now)
		if !ok {
			t.Fatalf("wait %d refused before the memory is full", i)
		}
		done(false)
	}
	if _, ok := w.begin("r", "fresh", now); ok {
		t.Error("a wait began with the memory of given-up tags full")
	}
}

// A notification repeated for a tag that never showed reads the list
// once: it does not hold its webhook worker for the wait again.
func TestRepeatedNotificationOfAMissingTagDoesNotWaitAgain(t *testing.T) {
	imgs := &lateTagImages{}
	d := New(Config{}, watching(imgs, "reg.example/app"), slog.New(slog.DiscardHandler))
	d.tagWait = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 3}
	id := auth.Identity{Instance: "i", Role: auth.Deployer}
	if _, _, err := d.Notify(context.Background(), id, "reg.example/app:9.9.9"); err != nil {
		t.Fatal(err)
	}
	first := imgs.reads
	if _, _, err := d.Notify(context.Background(), id, "reg.example/app:9.9.9"); err != nil {
		t.Fatal(err)
	}
	if first != 4 || imgs.reads-first != 1 {
		t.Errorf("reads: %d for the first notification (want 4), %d for the repeat (want 1)", first, imgs.reads-first)
	}
}
