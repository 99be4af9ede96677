package daemon

import (
	"testing"

	"google.golang.org/protobuf/proto"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// A named token's holder is who acted: alone where the caller claimed
// nothing or the same, beside the claim where it differs; a filter's
// "user" (History) is not a claim, and a forwarded call is not stamped
// twice.
func TestStampUsers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ claimed, want string }{
		{"", "alice"},
		{"alice", "alice"},
		{"bob", "alice as bob"},
		{"Jane Doe <jane@example.com>", "alice as Jane Doe <jane@example.com>"},
		{"alice <alice@example.com>", "alice <alice@example.com>"},
		{"alice as bob", "alice as bob"},
	} {
		rel := &fluxdv1.ReleaseRequest{Spec: &fluxdv1.ReleaseSpec{User: tc.claimed}}
		lock := &fluxdv1.LockRequest{User: tc.claimed}
		for _, m := range []proto.Message{rel, lock} {
			stampUsers(m, "alice")
		}
		if rel.GetSpec().GetUser() != tc.want || lock.GetUser() != tc.want {
			t.Errorf("claimed %q: release user %q, lock user %q; want %q", tc.claimed, rel.GetSpec().GetUser(), lock.GetUser(), tc.want)
		}
		if err := checkUsers(rel); err != nil {
			t.Errorf("stamped user %q refused as a commit's author: %v", rel.GetSpec().GetUser(), err)
		}
	}
	unnamed := &fluxdv1.LockRequest{User: "bob"}
	stampUsers(unnamed, "")
	if unnamed.GetUser() != "bob" {
		t.Errorf("a token without a name changed the user to %q", unnamed.GetUser())
	}
}
