package verify

import (
	"fmt"
	"path"
	"strings"

	"github.com/fluxd/fluxd/registry"
)

// The annotations that ask for a profile on a workload, in fluxd's
// vocabulary: fluxd.io/verify: NAME for all its containers,
// fluxd.io/verify.CONTAINER: NAME for one, which wins over the other.
const (
	Annotation       = "fluxd.io/verify"
	AnnotationPrefix = "fluxd.io/verify."
)

// Annotated is the profile a workload's annotations ask of container's
// image: its own annotation's, else the one for all containers, else "".
func Annotated(ann map[string]string, container string) string {
	if name := strings.TrimSpace(ann[AnnotationPrefix+container]); name != "" && container != "" {
		return name
	}
	return strings.TrimSpace(ann[Annotation])
}

// Required is every profile container's image, of repository, must
// satisfy: the one its workload's annotations name (Annotated) and that
// of every repositories rule matching the repository, as written or as
// registries spell it (nginx is index.docker.io/library/nginx), each once,
// annotation first. An annotation adds a requirement and never lifts
// one: the config's rules are the operator's floor, and whoever writes
// git cannot take them away. An annotation naming no profile of the
// config is an error, never "no verification".
func (c *Config) Required(ann map[string]string, container, repository string) ([]*Profile, error) {
	var out []*Profile
	add := func(name string) {
		p, _ := c.Profile(name)
		for _, q := range out {
			if q == p {
				return
			}
		}
		out = append(out, p)
	}
	if name := Annotated(ann, container); name != "" {
		if _, ok := c.Profile(name); !ok {
			return nil, fmt.Errorf("container %s asks for verification profile %q, which the verification config does not define (profiles: %s)", container, name, names(c.Profiles))
		}
		add(name)
	}
	canonical := registry.CanonicalRepository(repository)
	for _, r := range c.Repositories {
		if r.matches(repository) || r.matches(canonical) {
			add(r.Profile)
		}
	}
	return out, nil
}

func (r Rule) matches(repository string) bool {
	ok, _ := path.Match(r.Match, repository)
	return ok
}
