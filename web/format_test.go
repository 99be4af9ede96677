package web

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The page's words for an image's signature verification (format.js's
// signature), as the images table and the history rows show them: run
// in node, the page's own module, where node is installed.
func TestSignatureWords(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	mod, err := filepath.Abs("static/format.js")
	if err != nil {
		t.Fatal(err)
	}
	const key = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		name string
		v    any
		want any
	}{
		{"none", nil, nil},
		{"not required", map[string]any{"outcome": "not-required"}, nil},
		{"verified", map[string]any{"outcome": "verified", "profiles": []string{"signed"}, "digest": "sha256:aa",
			"detail": "profile signed: verified by key " + key + " (/etc/fluxd/cosign.pub)"},
			map[string]any{"text": "verified by key sha256:0123456789ab… (cosign.pub)", "cls": "ok",
				"title": "profile signed: verified by key " + key + " (/etc/fluxd/cosign.pub) at sha256:aa"}},
		{"unsigned", map[string]any{"outcome": "unsigned", "detail": "profile signed: unsigned: no cosign signature for sha256:bb"},
			map[string]any{"text": "unsigned", "cls": "bad", "title": "profile signed: unsigned: no cosign signature for sha256:bb"}},
		{"failed", map[string]any{"outcome": "failed", "detail": "profile a: verified by key k (a.pub); profile b: failed (wrong-key): 1 signature(s), none by the key(s) of profile \"b\""},
			map[string]any{"text": "failed: wrong-key", "cls": "bad",
				"title": "profile a: verified by key k (a.pub); profile b: failed (wrong-key): 1 signature(s), none by the key(s) of profile \"b\""}},
		// A missing attestation's detail has "; " inside it (what was
		// looked at; what the image has): the reason is still the badge's.
		{"missing attestation", map[string]any{"outcome": "failed", "detail": "profile sbom: failed (missing-attestation): signed by key k (a.pub), but no attestation of predicate type https://spdx.dev/Document for sha256:cc (looked in tag sha256-cc.att and the referrers; it has none)"},
			map[string]any{"text": "failed: missing-attestation", "cls": "bad",
				"title": "profile sbom: failed (missing-attestation): signed by key k (a.pub), but no attestation of predicate type https://spdx.dev/Document for sha256:cc (looked in tag sha256-cc.att and the referrers; it has none)"}},
		{"unchecked", map[string]any{"outcome": "unchecked"},
			map[string]any{"text": "not checked yet", "cls": "muted", "title": "its digest is not read yet"}},
		{"error", map[string]any{"outcome": "error", "detail": "cannot read its digest"},
			map[string]any{"text": "error: cannot read its digest", "cls": "warn", "title": "cannot read its digest"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, _ := json.Marshal(c.v)
			script := "import {signature} from " + jsString(t, "file://"+filepath.ToSlash(mod)) + ";\n" +
				"process.stdout.write(JSON.stringify(signature(" + string(in) + ")));"
			out, err := exec.Command(node, "--input-type=module", "-e", script).Output()
			if err != nil {
				t.Fatalf("node: %v", err)
			}
			var got any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("node printed %q: %v", out, err)
			}
			want := c.want
			if want != nil {
				b, _ := json.Marshal(want)
				_ = json.Unmarshal(b, &want)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

func jsString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
