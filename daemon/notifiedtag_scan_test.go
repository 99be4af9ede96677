package daemon

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/registry"
)

// unreadableTagImages is a registry client whose tag list shows 1.0.1
// from the lists'th list on, and whose scans leave 1.0.1 out, as
// registry/oci's scan leaves out a tag whose metadata cannot be read (an
// artifact, a signature, a manifest not readable yet).
type unreadableTagImages struct {
	mu            sync.Mutex
	lists, shows  int
	scans, images int
}

func (u *unreadableTagImages) Images(_ context.Context, repo string) ([]registry.Image, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.images++
	return []registry.Image{{Repository: repo, Tag: "1.0.0"}}, nil
}

func (u *unreadableTagImages) Refresh(_ context.Context, repo string) ([]registry.Image, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.scans++
	return []registry.Image{{Repository: repo, Tag: "1.0.0"}}, nil
}

func (u *unreadableTagImages) RefreshTags(_ context.Context, _ string) ([]string, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.lists++
	if u.lists >= u.shows {
		return []string{"1.0.0", "1.0.1"}, nil
	}
	return []string{"1.0.0"}, nil
}

// A notification of a repository whose users need images' metadata (a
// full scan, every mutable tag checked) waits for its tag by reading the
// tag list alone, and scans once more when the tag shows: each read of
// the wait was a whole forced scan, so a tag whose metadata a scan cannot
// read (listed, but never among the scan's images) cost seven forced
// scans of the repository per notification, and a registry's rate limit
// with them.
func TestNotifiedTagWaitReadsTheListNotScans(t *testing.T) {
	imgs := &unreadableTagImages{shows: 3}
	d := New(Config{}, watching(imgs, "reg.example/app"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if !d.needsMetadata(context.Background(), "reg.example/app") {
		t.Fatal("the test needs a repository whose users need metadata")
	}
	d.tagWait = wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 6}
	if _, _, err := d.Notify(context.Background(), auth.Identity{Instance: "i", Role: auth.Deployer}, "reg.example/app:1.0.1"); err != nil {
		t.Fatal(err)
	}
	if imgs.scans > 2 {
		t.Errorf("%d forced scans of the repository for one notification (%d tag lists); want at most 2: the first, and one when the tag showed", imgs.scans, imgs.lists)
	}
}
