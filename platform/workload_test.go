package platform

import (
	"strings"
	"testing"
)

func TestParseID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "default:deployment/helloworld", want: "default:deployment/helloworld"},
		{in: "prod:Deployment/api", want: "prod:deployment/api"},
		{in: "helloworld", err: "not of the form"},
		{in: "default/helloworld", err: "not of the form"},
		{in: ":deployment/x", err: "not of the form"},
		{in: "default:pod/x", err: `has kind "pod"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			id, err := ParseID(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseID(%q) error = %v, want %q", tc.in, err, tc.err)
				}
				return
			}
			if err != nil || id.String() != tc.want {
				t.Fatalf("ParseID(%q) = %v, %v; want %s", tc.in, id, err, tc.want)
			}
		})
	}
}
