package auth

import (
	"path/filepath"
	"testing"
	"time"
)

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
