package syncer

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/platform"
)

// A sync's history message counts its failures apart from the objects it
// lists, so that "failed" never runs into the first of them ("0 deleted,
// failed\nconfigured ...").
func TestSummarySaysFailuresApart(t *testing.T) {
	t.Parallel()
	ref := func(name string) platform.ObjectRef {
		return platform.ObjectRef{Kind: "ConfigMap", Namespace: "default", Name: name}
	}
	rep := &Report{Revision: "0123456789abcdef", Results: []platform.ObjectResult{
		{Ref: ref("a"), Action: platform.ActionChanged},
		{Ref: ref("b"), Action: platform.ActionFailed, Error: "refused"},
		{Ref: ref("c"), Action: platform.ActionUnchanged},
	}}
	want := "Sync of 0123456789ab: 0 created, 1 changed, 0 deleted; 1 failed\nconfigured " + ref("a").String()
	if diff := cmp.Diff(want, summary(rep)); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	rep = &Report{Revision: "0123456789abcdef", Err: "git unreachable"}
	if got := summary(rep); got != "Sync of 0123456789ab: 0 created, 0 changed, 0 deleted; the sync failed" {
		t.Errorf("summary of a failed sync: %q", got)
	}
}
