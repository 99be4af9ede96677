package gitrepo

import (
	"errors"
	"testing"
)

func TestParseUser(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in         string
		name, mail string
		bad        bool
	}{
		{in: "alice", name: "alice"},
		{in: "Alice Smith", name: "Alice Smith"},
		{in: "", name: ""},
		// git's author form, as Flux v1's fluxctl sent it by default.
		{in: "Jane Doe <jane@example.com>", name: "Jane Doe", mail: "jane@example.com"},
		{in: "Jane Doe<jane@example.com>", name: "Jane Doe", mail: "jane@example.com"},
		{in: "<jane@example.com>", name: "jane@example.com", mail: "jane@example.com"},
		{in: "Jane <not an address>", bad: true},
		{in: "Jane <>", bad: true},
		{in: "Jane <a@b> <c@d>", bad: true},
		{in: "Jane <a@b>x", bad: true},
		{in: "Ja<ne <a@b.c>", bad: true},
		{in: "Jane\n<a@b.c>", bad: true},
		{in: "a > b", bad: true},
		{in: "evil\nauthor x <y> 0 +0000", bad: true},
	} {
		got, err := ParseUser(tc.in)
		if tc.bad {
			if err == nil || !errors.Is(err, ErrBadSignature) {
				t.Errorf("ParseUser(%q) = %+v, %v; want an ErrBadSignature", tc.in, got, err)
			}
			continue
		}
		if err != nil || got.Name != tc.name || got.Email != tc.mail {
			t.Errorf("ParseUser(%q) = %+v, %v; want name %q, email %q", tc.in, got, err, tc.name, tc.mail)
		}
	}
}
