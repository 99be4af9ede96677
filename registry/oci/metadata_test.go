package oci

import (
	"testing"

	"github.com/fluxd/fluxd/registry"
)

func TestRecentMetasKeepsAboutTwoGenerations(t *testing.T) {
	r := newRecentMetas(2)
	for _, d := range []string{"a", "b", "c", "d", "e"} {
		r.put(d, registry.ImageMeta{Platform: d})
	}
	// a and b were dropped with the first generation; c and d are the
	// previous one, e the current.
	for d, want := range map[string]bool{"a": false, "b": false, "c": true, "d": true, "e": true} {
		if m, ok := r.get(d); ok != want || (ok && m.Platform != d) {
			t.Errorf("%s: got %v %+v, want kept=%v", d, ok, m, want)
		}
	}
}
