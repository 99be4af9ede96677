package release

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/platform"
)

// The status page's manifest view reads one workload's document from a
// file of several, as a release would apply it, comments kept.
func TestDocumentIsTheWorkloadsOwn(t *testing.T) {
	e, _, _, _ := newTestEngine(t)
	_, doc, err := e.Document(context.Background(), "apps.yaml", id("web"))
	if err != nil {
		t.Fatal(err)
	}
	got := string(doc)
	if !strings.Contains(got, "name: web") || !strings.Contains(got, "image: reg/web:1.0 # pinned") || strings.Contains(got, "frozen") || strings.Contains(got, "---") {
		t.Errorf("the document of web:\n%s", got)
	}
	if _, _, err := e.Document(context.Background(), "apps.yaml", id("nowhere")); !errors.Is(err, platform.ErrNotFound) {
		t.Errorf("a workload the file does not define: %v, want ErrNotFound", err)
	}
}
