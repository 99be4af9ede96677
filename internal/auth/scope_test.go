package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A scope line gives every token of its instance the scope, wherever the
// line is; an instance without one is unscoped; the file is read again
// when it changes, so a scope added while fluxd runs applies at once.
func TestScopeLinesScopeTheInstancesTokens(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	a, err := Create(path, Identity{Instance: "team-a", Role: Deployer})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(path, Identity{Instance: "team-b", Role: Admin})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := s.Authenticate(a); id.Scope != nil {
		t.Fatalf("before any scope line: %v", id.Scope)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("# team a's namespaces\nscope team-a namespaces=a,shared paths=teams/a/,base/a\n")
	f.Close()
	id, err := s.Authenticate(a)
	if err != nil {
		t.Fatal(err)
	}
	want := &Scope{Namespaces: []string{"a", "shared"}, Paths: []string{"teams/a", "base/a"}}
	if diff := cmp.Diff(want, id.Scope); diff != "" {
		t.Errorf("team-a's scope (-want +got):\n%s", diff)
	}
	if id, _ := s.Authenticate(b); id.Scope != nil {
		t.Errorf("team-b is unscoped, got %v", id.Scope)
	}
	inst := s.Instances()
	if len(inst) != 2 || inst["team-a"] == nil || inst["team-b"] != nil {
		t.Errorf("Instances() = %v", inst)
	}
	// Appending a token keeps the scope.
	if _, err := Create(path, Identity{Instance: "team-a", Role: Viewer}); err != nil {
		t.Fatalf("Create after a scope line: %v", err)
	}
}

func TestScopeContains(t *testing.T) {
	t.Parallel()
	var none *Scope
	ns := &Scope{Namespaces: []string{"a"}}
	paths := &Scope{Namespaces: []string{"a", "b"}, Paths: []string{"teams/a"}}
	for _, tc := range []struct {
		s        *Scope
		ns, file string
		want     bool
	}{
		{none, "x", "anything.yaml", true},
		{ns, "a", "", true},
		{ns, "a", "anywhere/x.yaml", true},
		{ns, "b", "", false},
		{paths, "a", "teams/a/web.yaml", true},
		{paths, "b", "teams/a/sub/web.yaml", true},
		{paths, "a", "teams/ab/web.yaml", false},
		{paths, "a", "teams/b/web.yaml", false},
		{paths, "a", "", true}, // only in the cluster
		{paths, "c", "teams/a/web.yaml", false},
	} {
		if got := tc.s.Contains(tc.ns, tc.file); got != tc.want {
			t.Errorf("%v.Contains(%q, %q) = %v, want %v", tc.s, tc.ns, tc.file, got, tc.want)
		}
	}
}

func TestBadScopeLinesNameTheLine(t *testing.T) {
	t.Parallel()
	tok := "sha256:" + strings.Repeat("a", 64) + " team-a deployer\n"
	for _, tc := range []struct{ name, content, want string }{
		{"no namespaces", tok + "scope team-a paths=x\n", "line 2: scope of team-a: a scope needs namespaces="},
		{"bad namespace", tok + "scope team-a namespaces=Team_A\n", `namespace "Team_A" is not a namespace name`},
		{"path outside", tok + "scope team-a namespaces=a paths=../b\n", `path "../b": give a path inside the repository`},
		{"absolute path", tok + "scope team-a namespaces=a paths=/etc\n", `path "/etc"`},
		{"unknown key", tok + "scope team-a namespaces=a kinds=x\n", `unknown key "kinds"`},
		{"twice", tok + "scope team-a namespaces=a\nscope team-a namespaces=b\n", "line 3: instance team-a has a scope already"},
		{"no instance", "scope\n", "line 1: want \"scope <instance>"},
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
		})
	}
}

// AddScope appends a scope line once, keeps an equal one, and refuses to
// change one the file has.
func TestAddScope(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens")
	sc := &Scope{Namespaces: []string{"a"}, Paths: []string{"teams/a"}}
	if err := AddScope(path, "team-a", sc); err != nil {
		t.Fatal(err)
	}
	if err := AddScope(path, "team-a", sc); err != nil {
		t.Errorf("the same scope again: %v", err)
	}
	if err := AddScope(path, "team-a", &Scope{Namespaces: []string{"b"}}); err == nil || !strings.Contains(err.Error(), "edit its scope line") {
		t.Errorf("another scope: %v", err)
	}
	tok, err := Create(path, Identity{Instance: "team-a", Role: Deployer})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := s.Authenticate(tok); id.Scope.String() != "namespaces=a paths=teams/a" {
		t.Errorf("scope = %v", id.Scope)
	}
	if raw, _ := os.ReadFile(path); strings.Count(string(raw), "scope team-a") != 1 {
		t.Errorf("the file holds:\n%s", raw)
	}
}
