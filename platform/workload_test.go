package platform

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
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

// Seeded random IDs from a small alphabet (separators included, so
// prefixes and ties are common): Compare agrees with the strings.
func TestIDCompareRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	part := func() string {
		const alpha = "ab-:/z"
		b := make([]byte, r.IntN(4))
		for i := range b {
			b[i] = alpha[r.IntN(len(alpha))]
		}
		return string(b)
	}
	for range 20000 {
		a, b := ID{part(), part(), part()}, ID{part(), part(), part()}
		if got, want := a.Compare(b), strings.Compare(a.String(), b.String()); got != want {
			t.Fatalf("%q.Compare(%q) = %d, want %d (seed %d)", a.String(), b.String(), got, want, seed)
		}
	}
}
