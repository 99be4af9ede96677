package daemon

import (
	"bytes"
	"context"
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
