package auth

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeTokens writes n viewer tokens of instance team-I and returns them.
func writeTokens(t testing.TB, path string, n int) []string {
	t.Helper()
	var toks []string
	for i := range n {
		tok, err := Create(path, Identity{Instance: fmt.Sprintf("team-%d", i), Role: Viewer})
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
	}
	return toks
}

// Among many tokens each finds its own identity, a token not in the file
// is refused, and the index follows the file: a token removed from it is
// refused at once, one whose role changed has its new role, and a line
// naming a token twice means its last line.
func TestTokenIndexFollowsTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	toks := writeTokens(t, path, 200)
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range toks {
		id, err := s.Authenticate(tok)
		if err != nil || id.Instance != fmt.Sprintf("team-%d", i) || id.Role != Viewer {
			t.Fatalf("token %d: %v, %v", i, id, err)
		}
	}
	for _, bad := range []string{"", "fxd_nope", toks[0] + "x", toks[0][:len(toks[0])-1]} {
		if _, err := s.Authenticate(bad); !errors.Is(err, ErrUnknownToken) {
			t.Errorf("Authenticate(%q): %v, want ErrUnknownToken", bad, err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	// Remove team-0's token; team-1's becomes admin (a second line for
	// its hash, after the first).
	hash1 := strings.Fields(lines[1])[0]
	rest := append(lines[1:], hash1+" team-1 admin")
	// The modification time alone may not move within the clock's
	// granularity; the size does.
	time.Sleep(10 * time.Millisecond)
	if err := os.WriteFile(path, []byte(strings.Join(rest, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(toks[0]); !errors.Is(err, ErrUnknownToken) {
		t.Errorf("a token removed from the file: %v, want ErrUnknownToken", err)
	}
	if id, err := s.Authenticate(toks[1]); err != nil || id.Role != Admin {
		t.Errorf("a token whose last line makes it admin: %v, %v", id, err)
	}
	if id, err := s.Authenticate(toks[2]); err != nil || id.Instance != "team-2" {
		t.Errorf("a token left alone: %v, %v", id, err)
	}
}

// BenchmarkAuthenticate is one call's check among 1,000 tokens, the
// tokens file settled (changed more than racyWindow ago), as it is in a
// running fluxd between edits.
func BenchmarkAuthenticate(b *testing.B) {
	benchmarkAuthenticate(b, func() time.Time { return time.Now().Add(racyWindow) })
}

// BenchmarkAuthenticateRacy is the same check in the seconds after an
// edit of the file, when each call compares the file's content.
func BenchmarkAuthenticateRacy(b *testing.B) {
	benchmarkAuthenticate(b, func() time.Time { return time.Time{} })
}

func benchmarkAuthenticate(b *testing.B, now func() time.Time) {
	path := filepath.Join(b.TempDir(), "tokens")
	toks := writeTokens(b, path, 1000)
	s, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	s.now = now
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := s.Authenticate(toks[i%len(toks)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
