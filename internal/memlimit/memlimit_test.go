package memlimit

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// cgroup writes files (path under root → content) as a container's
// /sys/fs/cgroup would show them.
func cgroup(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		path := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestContainer(t *testing.T) {
	t.Parallel()
	const mi512 = 512 << 20
	for _, tc := range []struct {
		name    string
		files   map[string]string
		limit   int64
		ok      bool
		wantErr string
	}{
		{"v2 limit", map[string]string{"memory.max": "536870912\n"}, mi512, true, ""},
		{"v2 no limit", map[string]string{"memory.max": "max\n"}, 0, false, ""},
		{"v1 limit", map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, mi512, true, ""},
		{"v1 no limit", map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}, 0, false, ""},
		{"no cgroup files", nil, 0, false, ""},
		{"v2 before v1", map[string]string{"memory.max": "268435456", "memory/memory.limit_in_bytes": "536870912"}, 256 << 20, true, ""},
		{"not a number", map[string]string{"memory.max": "lots\n"}, 0, false, `"lots" is neither a number of bytes nor "max"`},
		{"empty", map[string]string{"memory/memory.limit_in_bytes": ""}, 0, false, "set GOMEMLIMIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			limit, ok, err := Container(cgroup(t, tc.files))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if limit != tc.limit || ok != tc.ok {
				t.Errorf("Container = %d, %v; want %d, %v", limit, ok, tc.limit, tc.ok)
			}
		})
	}
}

// TestApply checks the limit the runtime ends up with: the one a user sees
// in go_gc_gomemlimit_bytes. Not parallel: the limit is the process's.
func TestApply(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	limited := map[string]string{"memory.max": "536870912\n"}
	for _, tc := range []struct {
		name    string
		env     string
		files   map[string]string
		ratio   float64
		want    Decision
		runtime int64 // the runtime's limit after Apply
	}{
		{"from the container", "", limited, 0.75, Decision{Source: FromContainer, Container: 512 << 20, Soft: 402653184}, 402653184},
		{"no container limit", "", map[string]string{"memory.max": "max"}, 0.9, Decision{Source: None}, math.MaxInt64},
		{"ratio 0 turns it off", "", limited, 0, Decision{Source: Disabled}, math.MaxInt64},
		// The runtime read GOMEMLIMIT at start; here the test stands in for it.
		{"explicit GOMEMLIMIT wins", "400MiB", limited, 0.9, Decision{Source: FromEnv, Soft: 400 << 20}, 400 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			t.Setenv("GOMEMLIMIT", tc.env)
			if tc.env != "" {
				debug.SetMemoryLimit(400 << 20)
			}
			got, err := Apply(cgroup(t, tc.files), tc.ratio)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Apply (-want +got):\n%s", diff)
			}
			if l := debug.SetMemoryLimit(-1); l != tc.runtime {
				t.Errorf("the runtime's soft limit is %d, want %d", l, tc.runtime)
			}
		})
	}
}

func TestApplyBadRatio(t *testing.T) {
	for _, r := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := Apply(t.TempDir(), r); err == nil || !strings.Contains(err.Error(), "between 0 and 1") {
			t.Errorf("ratio %v: err = %v, want one saying it is between 0 and 1", r, err)
		}
	}
}
