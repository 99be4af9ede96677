package verify

import (
	"context"
	"fmt"
	"strings"
)

// Gate is what a release asks of the verification config in force: which
// profiles a container's image must satisfy, and whether a digest
// satisfies them all. release.Verifier is its shape; cmd/fluxd builds one
// over --verify-config's File and a Cached verify/cosign Verifier.
type Gate struct {
	// Config is the config in force (File.Current, re-read on reload).
	Config func() *Loaded
	// Verifier checks one digest against one profile.
	Verifier Verifier
}

// NewGate returns a Gate over f's config and v.
func NewGate(f *File, v Verifier) *Gate {
	return &Gate{Config: f.Current, Verifier: v}
}

// Required names the profiles container's image, of repository, must
// satisfy (Config.Required): none means no verification applies.
func (g *Gate) Required(ann map[string]string, container, repository string) ([]string, error) {
	ps, err := g.Config().Required(ann, container, repository)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return names, nil
}

// Check verifies repository@digest against every profile required of
// container's image. An error is a check that could not be made (a
// registry down, a profile asking for what is not built): no verdict.
func (g *Gate) Check(ctx context.Context, ann map[string]string, container, repository, digest string) (Verdict, error) {
	l := g.Config()
	ps, err := l.Required(ann, container, repository)
	if err != nil {
		return Verdict{Digest: digest}, err
	}
	v := Verdict{Digest: digest}
	for _, p := range ps {
		r, err := g.Verifier.Verify(ctx, repository, digest, p, l.Keys[p.Name])
		if err != nil {
			return v, err
		}
		v.Results = append(v.Results, r)
		if r.Outcome != Verified {
			// One profile refusing is enough: the others cost requests
			// and change nothing.
			break
		}
	}
	return v, nil
}

// Verdict is the verification of one image digest under every profile
// required of it, in order, up to the first that did not verify.
type Verdict struct {
	Digest  string
	Results []Result
}

// Outcome is Verified when every profile verified, else the first other
// outcome.
func (v Verdict) Outcome() Outcome {
	for _, r := range v.Results {
		if r.Outcome != Verified {
			return r.Outcome
		}
	}
	if len(v.Results) == 0 {
		return ""
	}
	return Verified
}

// String says who signed, or why not, profile by profile.
func (v Verdict) String() string {
	var parts []string
	for _, r := range v.Results {
		parts = append(parts, fmt.Sprintf("profile %s: %s", r.Profile, r))
	}
	return strings.Join(parts, "; ")
}
