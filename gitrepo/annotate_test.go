package gitrepo

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/platform"
)

func TestSetAnnotations(t *testing.T) {
	t.Parallel()
	app := platform.ID{Namespace: "default", Kind: "deployment", Name: "app"}
	for _, tc := range []struct {
		name, in, want string
		values         map[string]string
	}{
		{
			name:   "no annotations yet",
			in:     "kind: Deployment\nmetadata:\n    name: app # the app\n    labels:\n        a: b\nspec: {}\n",
			values: map[string]string{"fluxd.io/automated": "true"},
			want:   "kind: Deployment\nmetadata:\n    annotations:\n        fluxd.io/automated: \"true\"\n    name: app # the app\n    labels:\n        a: b\nspec: {}\n",
		},
		{
			name:   "add to existing",
			in:     "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    x: y # keep\n",
			values: map[string]string{"fluxd.io/locked": "true", "fluxd.io/lock-message": `say "no"`},
			want:   "kind: Deployment\nmetadata:\n  name: app\n  annotations:\n    fluxd.io/lock-message: \"say \\\"no\\\"\"\n    fluxd.io/locked: \"true\"\n    x: y # keep\n",
		},
		{
			name:   "replace a value in place",
			in:     "---\nkind: Service\n---\nkind: Deployment\nmetadata:\n  name: app\n  annotations:\n    fluxd.io/automated: 'true' # on\n",
			values: map[string]string{"fluxd.io/automated": "false"},
			want:   "---\nkind: Service\n---\nkind: Deployment\nmetadata:\n  name: app\n  annotations:\n    fluxd.io/automated: \"false\" # on\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SetAnnotations([]byte(tc.in), app, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			defs, err := ParseFile("f.yaml", got)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.values {
				if defs[len(defs)-1].Annotations[k] != v {
					t.Errorf("annotation %s = %q after the edit, want %q", k, defs[len(defs)-1].Annotations[k], v)
				}
			}
		})
	}
}
