package registry

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

func TestParseRef(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Ref
		err  bool
	}{
		{in: "127.0.0.1:5000/app:1.2", want: Ref{Repository: "127.0.0.1:5000/app", Tag: "1.2"}},
		{in: "127.0.0.1:5000/app", want: Ref{Repository: "127.0.0.1:5000/app", Tag: "latest"}},
		{in: "nginx", want: Ref{Repository: "nginx", Tag: "latest"}},
		{in: "ghcr.io/org/app@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", want: Ref{Repository: "ghcr.io/org/app", Digest: "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
		// Found by FuzzParseRef: the tag was left in the repository. A
		// pinned image keeps its tag beside the digest.
		{in: "reg:5000/app:1.2@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", want: Ref{Repository: "reg:5000/app", Tag: "1.2", Digest: "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}},
		{in: "reg/app:-x@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", err: true},
		{in: "Bad Ref!", err: true},
		// Found by FuzzParseRef: go-containerregistry lets a tag start with . or -.
		{in: "reg/app:.0", err: true},
		{in: "reg/app:-x", err: true},
		{in: "app:", err: true},
	} {
		got, err := ParseRef(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseRef(%q) = %+v, %v; want %+v, err %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestSortNewestFirst(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	imgs := []Image{{Tag: "1.0", CreatedAt: t0}, {Tag: "1.2", CreatedAt: t0.Add(2 * time.Hour)}, {Tag: "1.1", CreatedAt: t0.Add(time.Hour)}, {Tag: "b"}, {Tag: "a"}}
	SortNewestFirst(imgs)
	var tags []string
	for _, i := range imgs {
		tags = append(tags, i.Tag)
	}
	if got := tags; got[0] != "1.2" || got[1] != "1.1" || got[2] != "1.0" || got[3] != "b" || got[4] != "a" {
		t.Errorf("order = %v", got)
	}
}

func TestImmutable(t *testing.T) {
	t.Parallel()
	for tag, want := range map[string]bool{
		"1.2.3": true, "v1.2": true, "7.0.0-alpine": true, "1.2.3+build.5": true, "20260101": true,
		"a1b2c3d": true, "sha-0123456789abcdef": true,
		"latest": false, "main": false, "feature-x": false, "stable": false, "": false,
	} {
		if got := Immutable(tag); got != want {
			t.Errorf("Immutable(%q) = %v, want %v", tag, got, want)
		}
	}
}

func TestValidTag(t *testing.T) {
	t.Parallel()
	for tag, want := range map[string]bool{
		"1.2.3": true, "latest": true, "_x": true, "v1.0-rc.1_b": true, strings.Repeat("a", 128): true,
		"": false, "-x": false, ".x": false, "1.0\nimage: evil": false, `a"b`: false, "a b": false,
		"a:b": false, "a/b": false, "1.0\n": false, "ä": false, strings.Repeat("a", 129): false,
	} {
		if got := ValidTag(tag); got != want {
			t.Errorf("ValidTag(%q) = %v, want %v", tag, got, want)
		}
	}
}

// A refused reference is named once, and the error still unwraps to
// go-containerregistry's.
func TestParseRefErrorSaysItOnce(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"not a ref!!": `"not a ref!!" is not a valid image reference: write it as [REGISTRY/]REPOSITORY[:TAG], e.g. reg.example:5000/team/app:1.2 (lower-case repository, no spaces)`,
		"reg/app:-x":  `"reg/app:-x" is not a valid image reference: tag "-x" must start with a letter, a digit or _`,
	} {
		_, err := ParseRef(in)
		if err == nil || err.Error() != want {
			t.Errorf("ParseRef(%q) error:\n got %v\nwant %s", in, err, want)
		}
	}
	_, err := ParseRef("Reg/App:1")
	if err == nil || strings.Count(err.Error(), "Reg/App") != 1 {
		t.Errorf("ParseRef(Reg/App:1) error repeats the reference: %v", err)
	}
	var bad *name.ErrBadName
	if !errors.As(err, &bad) {
		t.Errorf("the error does not unwrap to name.ErrBadName: %T", errors.Unwrap(err))
	}
}

// A repository counts as run whether it is spelled as the workload
// spells it or in full (Docker Hub's short names); a path on another
// host is another repository.
func TestRunsRepository(t *testing.T) {
	t.Parallel()
	running := []string{"nginx:1.25", "reg.example:5000/team/app:1.0", "ghcr.io/org/tool@sha256:" + strings.Repeat("a", 64)}
	for repo, want := range map[string]bool{
		"nginx":                           true,
		"docker.io/library/nginx":         true,
		"index.docker.io/library/nginx":   true,
		"reg.example:5000/team/app":       true,
		"ghcr.io/org/tool":                true,
		"127.0.0.1:5000/team/app":         false,
		"reg.example/team/app":            false,
		"reg.example:5000/team/app/extra": false,
		"169.254.169.254/latest":          false,
	} {
		if got := RunsRepository(running, repo); got != want {
			t.Errorf("RunsRepository(%q) = %v, want %v", repo, got, want)
		}
	}
}
