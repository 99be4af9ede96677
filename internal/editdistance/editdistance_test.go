package editdistance

import (
	"fmt"
	"testing"
)

func TestLevenshtein(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"helloworl", "helloworld", 1}, {"1.2.0", "1.2.9", 1}, {"kitten", "sitting", 3}} {
		if got := Levenshtein(tc.a, tc.b); got != tc.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	if got := fmt.Sprint(Closest("1.2.9", []string{"2.0.0", "1.2.0", "1.1.0", "1.2.1"}, 2)); got != "[1.2.0 1.2.1]" {
		t.Errorf("Closest = %s", got)
	}
}
