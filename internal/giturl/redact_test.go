package giturl

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://user:s3cret@git.example/r.git": "https://user:redacted@git.example/r.git",
		"https://ghp_token@git.example/r.git":   "https://redacted@git.example/r.git",
		"file:///tmp/r.git":                     "file:///tmp/r.git",
	} {
		if got := Redact(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// A token in a query string (?private_token=) is hidden like one in the
// user info.
func TestRedactHidesQueryStrings(t *testing.T) {
	got := Redact("https://git.example/org/repo.git?private_token=s3cret-query-token")
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "git.example/org/repo.git") {
		t.Errorf("Redact = %q", got)
	}
}
