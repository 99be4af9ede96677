package gitrepo

import (
	"fmt"
	"strings"
	"testing"
)

// A list whose items alias anchors that each alias the one before twice
// expands exponentially: a few hundred bytes in git must not hold the
// sync and every release for seconds or exhaust memory. It is refused as a
// problem naming the file, and the other objects are still read.
func TestAliasBombIsRefused(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: bomb}\n  data:\n    l0: &l0 [x, x, x, x, x, x, x, x]\n")
	levels := 30
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "    l%d: &l%d [*l%d, *l%d]\n", i, i, i-1, i-1)
	}
	b.WriteString("- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: ok}\n  data: {a: b}\n")
	objs, problems := ParseObjects("bomb.yaml", []byte(b.String()))
	if len(problems) != 1 || !strings.Contains(problems[0].Error(), "alias bomb") {
		t.Fatalf("problems = %v; want the bomb refused", problems)
	}
	if len(objs) != 1 || objs[0].Ref().Name != "ok" {
		t.Errorf("objects = %v; want the other ConfigMap read", objs)
	}
}
