package txtar

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	t.Parallel()
	got := Parse("the rule\n-- a.yaml --\nx: 1 # ü\n\n-- dir/b --\n-- c --\nlast")
	want := Archive{Comment: "the rule\n", Files: []File{{"a.yaml", "x: 1 # ü\n\n"}, {"dir/b", ""}, {"c", "last"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}
