package auth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
