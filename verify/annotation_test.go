package verify

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAnnotated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		ann       map[string]string
		container string
		want      string
	}{
		{"none", nil, "app", ""},
		{"all containers", map[string]string{"fluxd.io/verify": "signed"}, "app", "signed"},
		{"the container's own wins", map[string]string{"fluxd.io/verify": "signed", "fluxd.io/verify.app": "ci"}, "app", "ci"},
		{"another container's is not this one's", map[string]string{"fluxd.io/verify.sidecar": "ci"}, "app", ""},
		{"another container's leaves the one for all", map[string]string{"fluxd.io/verify": "signed", "fluxd.io/verify.sidecar": "ci"}, "app", "signed"},
		{"blank is unset", map[string]string{"fluxd.io/verify": "signed", "fluxd.io/verify.app": " "}, "app", "signed"},
		{"spaces trimmed", map[string]string{"fluxd.io/verify": " signed\n"}, "app", "signed"},
		{"no container name", map[string]string{"fluxd.io/verify.": "ci", "fluxd.io/verify": "signed"}, "", "signed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Annotated(tc.ann, tc.container); got != tc.want {
				t.Errorf("Annotated(%v, %q) = %q, want %q", tc.ann, tc.container, got, tc.want)
			}
		})
	}
}

func TestRequired(t *testing.T) {
	t.Parallel()
	c, err := Parse([]byte(`profiles:
- name: signed
  keys: [cosign.pub]
- name: ci
  keys: [ci.pub]
- name: hub
  keys: [hub.pub]
repositories:
- match: ghcr.io/org/*
  profile: signed
- match: ghcr.io/org/payments
  profile: ci
- match: index.docker.io/library/*
  profile: hub
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		ann        map[string]string
		repository string
		want       []string
		err        string
	}{
		{"nothing applies", nil, "quay.io/x/y", nil, ""},
		{"a repository rule", nil, "ghcr.io/org/app", []string{"signed"}, ""},
		{"every rule that matches applies", nil, "ghcr.io/org/payments", []string{"signed", "ci"}, ""},
		{"the glob does not cross a slash", nil, "ghcr.io/org/team/app", nil, ""},
		{"Docker Hub's short names, spelled out", nil, "nginx", []string{"hub"}, ""},
		{"an annotation where no rule applies", map[string]string{"fluxd.io/verify": "ci"}, "quay.io/x/y", []string{"ci"}, ""},
		{"an annotation adds to the rules, never lifts one", map[string]string{"fluxd.io/verify.app": "ci"}, "ghcr.io/org/app", []string{"ci", "signed"}, ""},
		{"the same profile twice counts once", map[string]string{"fluxd.io/verify": "signed"}, "ghcr.io/org/app", []string{"signed"}, ""},
		{"an unknown profile is an error, not no verification", map[string]string{"fluxd.io/verify": "sigend"}, "quay.io/x/y", nil,
			`container app asks for verification profile "sigend", which the verification config does not define (profiles: signed, ci, hub)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ps, err := c.Required(tc.ann, "app", tc.repository)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.Name)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}
