package daemon

import (
	"testing"

	"github.com/fluxd/fluxd/history"
)

// An automation that also sets a tag filter is an automation in history
// (history --type automate finds it); only a change of both automation and
// lock, or of filters alone, is a general policy change.
func TestPolicyUpdateHistoryType(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	semver := "semver:~1"
	for _, tc := range []struct {
		name string
		u    PolicyUpdate
		want history.Type
	}{
		{"automate", PolicyUpdate{Automated: &yes}, history.Automate},
		{"automate with a filter", PolicyUpdate{Automated: &yes, Tags: map[string]string{"app": semver}}, history.Automate},
		{"automate with tag-all", PolicyUpdate{Automated: &yes, TagAll: &semver}, history.Automate},
		{"deautomate", PolicyUpdate{Automated: &no}, history.Deautomate},
		{"lock with a filter", PolicyUpdate{Locked: &yes, Tags: map[string]string{"app": semver}}, history.Lock},
		{"unlock", PolicyUpdate{Locked: &no}, history.Unlock},
		{"filter alone", PolicyUpdate{Tags: map[string]string{"app": semver}}, history.Policy},
		{"automate and lock", PolicyUpdate{Automated: &yes, Locked: &yes}, history.Policy},
	} {
		if got := tc.u.historyType(); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.name, got, tc.want)
		}
	}
}
