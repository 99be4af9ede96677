package verify

import (
	"regexp"
	"testing"
)

func TestFingerprint(t *testing.T) {
	t.Parallel()
	a, b := PublicKey{ID: "sha256:aa"}, PublicKey{ID: "sha256:bb"}
	p := &Profile{Name: "ci", Keys: []string{"a.pub", "b.pub"}}
	base := Fingerprint(p, []PublicKey{a, b})
	if got := Fingerprint(p, []PublicKey{b, a}); got != base {
		t.Errorf("the order of the keys changed the fingerprint: %s, %s", got, base)
	}
	if got := Fingerprint(&Profile{Name: "ci", Keys: []string{"elsewhere/a.pub", "b.pub"}}, []PublicKey{a, b}); got != base {
		t.Errorf("the same keys in other files changed the fingerprint")
	}
	for name, q := range map[string]struct {
		p    *Profile
		keys []PublicKey
	}{
		"a key less":     {p, []PublicKey{a}},
		"another name":   {&Profile{Name: "cd"}, []PublicKey{a, b}},
		"an attestation": {&Profile{Name: "ci", Attestations: []string{"https://spdx.dev/Document"}}, []PublicKey{a, b}},
		"an identity": {&Profile{Name: "ci", Keyless: []Identity{{Issuer: "https://i", SubjectRegexp: regexp.MustCompile(`^a$`)}}},
			[]PublicKey{a, b}},
	} {
		if got := Fingerprint(q.p, q.keys); got == base {
			t.Errorf("%s: same fingerprint %s", name, got)
		}
	}
	x := Fingerprint(&Profile{Name: "ci", Keyless: []Identity{{Issuer: "https://i", SubjectRegexp: regexp.MustCompile(`^a$`)}}}, nil)
	y := Fingerprint(&Profile{Name: "ci", Keyless: []Identity{{Issuer: "https://i", SubjectRegexp: regexp.MustCompile(`^b$`)}}}, nil)
	if x == y {
		t.Errorf("another subject, same fingerprint")
	}
	ci := func(root string, tlog TlogMode) string {
		return Fingerprint(&Profile{Name: "ci", Keyless: []Identity{{Issuer: "https://i", Subject: "a"}},
			TrustedRoot: "r.json", TrustedRootJSON: []byte(root), Tlog: tlog}, nil)
	}
	if ci(`{"a":1}`, TlogRequired) == ci(`{"a":2}`, TlogRequired) {
		t.Errorf("another trusted root in the same file, same fingerprint")
	}
	if ci(`{}`, TlogRequired) == ci(`{}`, TlogIgnore) {
		t.Errorf("another tlog setting, same fingerprint")
	}
}
