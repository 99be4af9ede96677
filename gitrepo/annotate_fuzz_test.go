package gitrepo

import (
	"testing"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
)

func FuzzSetAnnotations(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s, "fluxd.io/lock-message", `the "big" one`)
		f.Add(s, "a", "")
		f.Add(s, "fluxd.io/tag-all", "regex:^build-(\\d+)$\n\u00e9\u2028")
	}
	for _, s := range valueSeeds {
		f.Add(s, "a", "x")
		f.Add(s, "a", "")
		f.Add(s, "new", "y")
	}
	f.Fuzz(func(t *testing.T, content, key, value string) {
		content = string(fuzzContent(content, annotationTemplates))
		def := firstWorkload([]byte(content))
		if def == nil {
			return
		}
		out, err := SetAnnotations([]byte(content), def.ID, map[string]string{key: value})
		if err != nil {
			return
		}
		want := *def
		want.RawAnnotations = map[string]string{}
		for k, v := range def.RawAnnotations {
			want.RawAnnotations[k] = v
		}
		set := func(v string) {
			if v == "" {
				delete(want.RawAnnotations, key)
			} else {
				want.RawAnnotations[key] = v
			}
			want.Annotations, want.Warnings = policy.Read(want.RawAnnotations)
			// What the annotations define but does nothing is warned
			// of too (a key fluxd does not know, a filter of a
			// container the workload does not have).
			names := make([]string, 0, len(def.Containers))
			for _, c := range def.Containers {
				names = append(names, c.Name)
			}
			want.Warnings = append(want.Warnings, policy.Unhonoured(want.RawAnnotations, policy.Object{HelmRelease: def.ID.Kind == platform.KindHelmRelease, Containers: names})...)
			want.Dialects = policy.Dialects(want.RawAnnotations, nil)
		}
		set(value)
		checkEdit(t, []byte(content), out, &want, nil, map[string]string{key: value})
		if value == "" {
			return
		}
		// What fluxd wrote, it can edit again and remove.
		for _, v := range []string{value + "\"\\", ""} {
			next, err := SetAnnotations(out, def.ID, map[string]string{key: v})
			if err != nil {
				t.Fatalf("setting %q after %q: %v\n%s", v, value, err, out)
			}
			set(v)
			checkEdit(t, out, next, &want, nil, map[string]string{key: v})
			out = next
		}
	})
}
