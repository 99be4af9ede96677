package localstack

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// 'make restart-fluxd ARGS=...' adds flags to the recorded command line;
// a flag given again replaces the one recorded (a second restart with
// another --verify-config does not pass both); anything but --name=value
// is refused.
func TestWithFlags(t *testing.T) {
	t.Parallel()
	recorded := []string{"/bin/fluxd", "--listen=127.0.0.1:1", "--verify-config=/old.yaml", "--git-path=a", "--git-path=b"}
	got, err := withFlags(recorded, []string{"--verify-config=/new.yaml", "--log-level=debug"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/bin/fluxd", "--listen=127.0.0.1:1", "--git-path=a", "--git-path=b", "--verify-config=/new.yaml", "--log-level=debug"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if d := cmp.Diff([]string{"/bin/fluxd", "--listen=127.0.0.1:1", "--verify-config=/old.yaml", "--git-path=a", "--git-path=b"}, recorded); d != "" {
		t.Errorf("the recorded line was changed in place (-want +got)\n%s", d)
	}
	for _, bad := range []string{"--verify-config", "-v=1", "verify-config=x", "--=x"} {
		if _, err := withFlags(recorded, []string{bad}); err == nil {
			t.Errorf("%q was taken; want it refused", bad)
		}
	}
}
