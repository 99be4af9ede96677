package registry

import (
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
)

// FuzzParseRef checks that any image reference, as a manifest or a
// notification may carry it, parses without a panic into a repository
// that go-containerregistry accepts, and reads back as it was parsed.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{
		"nginx", "nginx:1.25", "library/nginx:latest", "127.0.0.1:5000/app:1.2", "127.0.0.1:5000/app",
		"ghcr.io/org/team/app:v1.2.3-rc.1", "ghcr.io/org/app@sha256:" + strings.Repeat("0123456789abcdef", 4),
		"localhost:5000", "app:", "Bad Ref!", "a:b:c", "reg/app:1.0\nimage: evil", "reg:5000/app:tag@sha256:" + strings.Repeat("a", 64),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tagged := HasTag(s)
		ref, err := ParseRef(s)
		if err != nil {
			return
		}
		if _, err := name.NewRepository(ref.Repository, name.WeakValidation); err != nil {
			t.Fatalf("ParseRef(%q) = %+v: the repository does not parse: %v", s, ref, err)
		}
		if (ref.Digest != "") != strings.Contains(s, "@") {
			t.Fatalf("ParseRef(%q) = %+v: the digest is not the one written", s, ref)
		}
		if ref.Digest != "" {
			// A pinned reference reads back as written, digest and tag
			// alike, and pinning it again to its digest changes nothing.
			if ref.Pinned() != s {
				t.Errorf("ParseRef(%q) = %+v, whose Pinned is %q", s, ref, ref.Pinned())
			}
			if ref.Tag != "" && PinDigest(s, ref.Digest) != s {
				t.Errorf("PinDigest(%q, %q) = %q", s, ref.Digest, PinDigest(s, ref.Digest))
			}
			if _, err := name.NewDigest(ref.Repository+"@"+ref.Digest, name.WeakValidation); err != nil {
				t.Errorf("ParseRef(%q) = %+v: the digest does not parse: %v", s, ref, err)
			}
		}
		if ref.Tag == "" {
			if ref.Digest == "" {
				t.Fatalf("ParseRef(%q) = %+v: no tag, and no digest either", s, ref)
			}
			return
		}
		if !ValidTag(ref.Tag) {
			t.Errorf("ParseRef(%q) = %+v: the tag breaks the OCI grammar", s, ref)
		}
		if !tagged && ref.Digest == "" && (ref.Tag != "latest" || ref.Repository != s) {
			t.Errorf("ParseRef(%q) = %+v, but HasTag says it has no tag", s, ref)
		}
		again, err := ParseRef(ref.Pinned())
		if err != nil || again != ref {
			t.Errorf("ParseRef(%q) = %+v, whose String %q parses as %+v (%v)", s, ref, ref.String(), again, err)
		}
	})
}
