package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCreateAndAuthenticate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	admin, err := Create(path, Identity{Instance: "team-a", Role: Admin})
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := Create(path, Identity{Instance: "team-b", Role: Viewer})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(admin, TokenPrefix) {
		t.Errorf("token %q lacks prefix %q", admin, TokenPrefix)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), admin) || strings.Contains(string(raw), viewer) {
		t.Fatalf("tokens file holds a plain token:\n%s", raw)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens file mode = %v, want 0600", fi.Mode().Perm())
	}

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		want  Identity
		err   error
	}{
		{admin, Identity{Instance: "team-a", Role: Admin}, nil},
		{viewer, Identity{Instance: "team-b", Role: Viewer}, nil},
		{"", Identity{}, ErrUnknownToken},
		{admin + "x", Identity{}, ErrUnknownToken},
		{"fxd_nope", Identity{}, ErrUnknownToken},
	} {
		got, err := s.Authenticate(tc.token)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("Authenticate(%q) = %v, %v; want %v, %v", tc.token, got, err, tc.want, tc.err)
		}
	}
}

func TestStoreReloadsOnChange(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Create(path, Identity{Instance: "dev", Role: Deployer})
	if err != nil {
		t.Fatal(err)
	}
	if id, err := s.Authenticate(tok); err != nil || id.Role != Deployer {
		t.Fatalf("token created after Open: got %v, %v", id, err)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, content, want string }{
		{"plain token", "fxd_abc team admin\n", `line 1: the hash must start with "sha256:"`},
		{"short hash", "# c\n\nsha256:abcd team admin\n", "line 3: the hash is not 64 hexadecimal digits"},
		{"bad role", "sha256:" + strings.Repeat("a", 64) + " team root\n", `line 1: unknown role "root"`},
		{"bad instance", "sha256:" + strings.Repeat("a", 64) + " Team! admin\n", `line 1: instance ID "Team!" is not valid`},
		{"fields", "sha256:" + strings.Repeat("a", 64) + " team\n", "line 1: want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := Open(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open error = %v, want it to contain %q", err, tc.want)
			}
			if _, err := Create(path, Identity{Instance: "x", Role: Admin}); err == nil {
				t.Fatal("Create appended to a broken tokens file")
			}
		})
	}
}

func TestRoleOrder(t *testing.T) {
	t.Parallel()
	if (Identity{Role: Viewer}).Allows(Deployer) {
		t.Error("viewer allowed to deploy")
	}
	if !(Identity{Role: Admin}).Allows(Deployer) {
		t.Error("admin not allowed to deploy")
	}
}

// A token made with a name authenticates as that name; a bad name is
// refused at creation and in the file.
func TestTokenName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	tok, err := Create(path, Identity{Instance: "team", Role: Deployer, Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Create(path, Identity{Instance: "team", Role: Viewer})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := s.Authenticate(tok); err != nil || id.Name != "alice" || id.Role != Deployer {
		t.Errorf("named token: %+v, %v", id, err)
	}
	if id, err := s.Authenticate(plain); err != nil || id.Name != "" {
		t.Errorf("unnamed token: %+v, %v", id, err)
	}
	for _, bad := range []string{"a b", "x<y>", "", "-lead"} {
		if _, err := Create(path, Identity{Instance: "team", Role: Viewer, Name: bad}); bad != "" && err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
	if err := os.WriteFile(path, []byte("sha256:"+strings.Repeat("0", 64)+" team viewer name=<evil>\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a bad name in the file: %v", err)
	}
}

// A token revoked by rewriting the file at the same size, its mtime put
// back ('cp -p', 'touch -r', a rename in one tick of a coarse clock), is
// refused at the next call. "settled" judges the file long after its
// last change, so only its stamp (inode, ctime) can tell; "just written"
// judges it as fluxd would right after the write.
func TestRevokedBySameSizeRewriteWithMtimeKept(t *testing.T) {
	t.Parallel()
	rewrites := map[string]func(t *testing.T, path string, data []byte, mtime time.Time){
		"in place": func(t *testing.T, path string, data []byte, mtime time.Time) {
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		},
		"renamed into place": func(t *testing.T, path string, data []byte, mtime time.Time) {
			tmp := path + ".new"
			if err := os.WriteFile(tmp, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(tmp, mtime, mtime); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		},
	}
	clocks := map[string]func() time.Time{
		"settled":      func() time.Time { return time.Now().Add(time.Hour) },
		"just written": time.Now,
	}
	for rname, rewrite := range rewrites {
		for cname, clock := range clocks {
			t.Run(rname+"/"+cname, func(t *testing.T) {
				t.Parallel()
				path := filepath.Join(t.TempDir(), "tokens")
				keep, err := Create(path, Identity{Instance: "dev", Role: Viewer})
				if err != nil {
					t.Fatal(err)
				}
				revoked, err := Create(path, Identity{Instance: "dev", Role: Deployer})
				if err != nil {
					t.Fatal(err)
				}
				s, err := Open(path)
				if err != nil {
					t.Fatal(err)
				}
				s.now = clock
				if _, err := s.Authenticate(revoked); err != nil {
					t.Fatalf("before the rewrite: %v", err)
				}
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				rewrite(t, path, revokeLine(t, path, revoked), fi.ModTime())
				if fi2, _ := os.Stat(path); fi2.Size() != fi.Size() || !fi2.ModTime().Equal(fi.ModTime()) {
					t.Fatalf("the rewrite changed the size or mtime: %d %v, was %d %v", fi2.Size(), fi2.ModTime(), fi.Size(), fi.ModTime())
				}
				if id, err := s.Authenticate(revoked); !errors.Is(err, ErrUnknownToken) {
					t.Errorf("a token revoked by a same-size rewrite with the mtime kept: %+v, %v; want ErrUnknownToken", id, err)
				}
				if id, err := s.Authenticate(keep); err != nil || id.Role != Viewer {
					t.Errorf("a token left in the file: %+v, %v", id, err)
				}
			})
		}
	}
}

// On a filesystem whose clock is coarse, a rewrite in the tick of the
// last change leaves the whole stamp as it was, ctime included: the store
// compares the content while the file is that recent, and stops once it
// has read it a window after its change.
func TestRacyStampComparesContent(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	revoked, err := Create(path, Identity{Instance: "dev", Role: Deployer})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// A filesystem with one tick for all time: every stamp is the same.
	tick := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	coarse := fileStamp{Ctime: tick.UnixNano(), Mtime: tick.UnixNano(), Size: 1}
	s.stampOf = func(fs.FileInfo) fileStamp { return coarse }
	now := tick.Add(racyWindow / 2)
	s.now = func() time.Time { return now }
	// Read the file again under that clock: racy, a second after its change.
	s.mu.Lock()
	s.stamp = fileStamp{}
	s.mu.Unlock()
	if _, err := s.Authenticate(revoked); err != nil {
		t.Fatalf("before the rewrite: %v", err)
	}
	if err := os.WriteFile(path, revokeLine(t, path, revoked), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(revoked); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("a token revoked within the tick of the last change: %v; want ErrUnknownToken", err)
	}
	now = tick.Add(racyWindow)
	_, _ = s.Authenticate(revoked)
	s.mu.Lock()
	racy := s.racy
	s.mu.Unlock()
	if racy {
		t.Error("the file is still compared by content after a read a window past its change")
	}
}

// revokeLine is the tokens file at path with token's line replaced by one
// of the same length for another token.
func revokeLine(t *testing.T, path, token string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(token))
	old := hex.EncodeToString(sum[:])
	other := sha256.Sum256([]byte(token + "-other"))
	out := strings.Replace(string(b), old, hex.EncodeToString(other[:]), 1)
	if out == string(b) {
		t.Fatalf("token's hash is not in %s", path)
	}
	return []byte(out)
}

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
