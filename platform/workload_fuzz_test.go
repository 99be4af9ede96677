package platform

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParseID checks that no service ID makes ParseID panic, that a parsed
// ID has every part and a known kind, and that its String parses back to
// the same ID.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{
		"default:deployment/web", "kube-system:DaemonSet/proxy", "ns:cronjob/a/b", "ns:statefulset/db:0",
		"default:deployment/", ":deployment/web", "default:pod/web", "default/web", "a:b:c/d", "ns:deploymen\u212at/x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseID(s)
		if err != nil {
			return
		}
		if id.Namespace == "" || id.Name == "" || !slices.Contains(Kinds, id.Kind) {
			t.Fatalf("ParseID(%q) = %#v: a part is missing or the kind is unknown", s, id)
		}
		again, err := ParseID(id.String())
		if err != nil || again != id {
			t.Errorf("ParseID(%q) = %#v, whose String %q parses as %#v (%v)", s, id, id.String(), again, err)
		}
	})
}

// FuzzIDCompare checks that Compare orders IDs as their String forms do,
// whatever bytes the parts hold (separators included).
func FuzzIDCompare(f *testing.F) {
	f.Add("a", "deployment", "x", "a-b", "deployment", "x")
	f.Add("a", "b:c", "d", "a:b", "c", "d")
	f.Add("", "", "", "", "", "/")
	f.Add("ns", "deployment", "web", "ns", "deployment", "web")
	f.Fuzz(func(t *testing.T, n1, k1, m1, n2, k2, m2 string) {
		a, b := ID{n1, k1, m1}, ID{n2, k2, m2}
		want := strings.Compare(a.String(), b.String())
		if got := a.Compare(b); got != want {
			t.Errorf("%q.Compare(%q) = %d, want %d as their strings compare", a.String(), b.String(), got, want)
		}
	})
}
