package release

import (
	"testing"

	"github.com/fluxd/fluxd/internal/auth"
)

// SoleInstance: the one instance whose scope holds the work, else the
// default, whether none or several hold it.
func TestSoleInstance(t *testing.T) {
	a, b := &auth.Scope{}, &auth.Scope{}
	holdsOnly := func(want ...*auth.Scope) func(*auth.Scope) bool {
		return func(sc *auth.Scope) bool {
			for _, w := range want {
				if sc == w {
					return true
				}
			}
			return false
		}
	}
	insts := map[string]*auth.Scope{"team-a": a, "team-b": b}
	for _, c := range []struct {
		name  string
		holds func(*auth.Scope) bool
		want  string
	}{
		{"one holds it", holdsOnly(a), "team-a"},
		{"the other holds it", holdsOnly(b), "team-b"},
		{"both hold it", holdsOnly(a, b), "default"},
		{"none holds it", holdsOnly(), "default"},
	} {
		if got := SoleInstance(insts, c.holds, "default"); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := SoleInstance(nil, holdsOnly(a), "default"); got != "default" {
		t.Errorf("no instances: %q", got)
	}
}
