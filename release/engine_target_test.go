package release

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// cosign's own tags are never an image to release: named by hand they
// are refused, and "the newest" of a repository skips them, though a
// signature pushed after its image is newer than it.
func TestReleaseNeverTargetsCosignArtifacts(t *testing.T) {
	e, _, _, _ := newTestEngine(t)
	sig := "sha256-" + strings.Repeat("a", 64) + ".sig"
	later := time.Date(2026, 1, 1, 5, 0, 0, 0, time.UTC)
	imgs := e.images.(memImages)
	imgs["reg/web"] = append([]registry.Image{{Repository: "reg/web", Tag: sig, CreatedAt: later}}, imgs["reg/web"]...)
	ctx := context.Background()

	p, err := e.Plan(ctx, Spec{Services: []platform.ID{id("web")}, Image: "reg/web"})
	if err != nil {
		t.Fatal(err)
	}
	if got := rows(p); len(got) != 1 || got[0].Updates != "web:reg/web:1.0->reg/web:1.2" {
		t.Errorf("the newest of a repository with a newer signature tag: %+v, want 1.2", got)
	}
	_, err = e.Plan(ctx, Spec{Services: []platform.ID{id("web")}, Image: "reg/web:" + sig})
	if err == nil || !strings.Contains(err.Error(), "one of cosign's own artifacts") {
		t.Errorf("a release of a signature tag by hand: %v, want it refused", err)
	}
}
