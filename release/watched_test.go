package release

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/internal/auth"
)

// A scoped release may name only repositories its own services run: the
// error about another team's repository is the one about an unwatched
// repository, and names none of its tags (found by review).
func TestScopedPlanReadsNoOtherTeamsRegistry(t *testing.T) {
	e, _, _, _ := newTestEngine(t)
	_, err := e.Plan(context.Background(), Spec{All: true, Image: "reg/web:9.9", Scope: &auth.Scope{Namespaces: []string{"team-b"}}})
	if err == nil || !strings.Contains(err.Error(), "no service runs an image of reg/web") || strings.Contains(err.Error(), "1.2") {
		t.Errorf("scoped plan of another team's repository: %v; want it refused as unwatched, naming no tag", err)
	}
	if _, err := e.Plan(context.Background(), Spec{All: true, Image: "reg/web:9.9"}); err == nil || strings.Contains(err.Error(), "no service runs") {
		t.Errorf("unscoped plan of a watched repository's missing tag: %v; want the tag refused, not the repository", err)
	}
}
