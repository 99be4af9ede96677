package daemon

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// Two scopes whose answers start with the same service and have as many
// services each share that service's kept protobuf: each caller still
// gets its own scope's services over gRPC, never the other's. The
// codec's kept encoding was found by the answer's first protobuf, which
// kept services made the same for both answers, and team-a was sent
// team-b's list (c:deployment/secret) or the reverse.
func TestKeptEncodingIsNotAnotherScopes(t *testing.T) {
	c := &atomicGenCluster{stubCluster: stubCluster{workloads: answerWorkloads("a/shared", "b/mine", "c/secret")}}
	f := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: c, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: &stubGit{}})
	addScope(t, f, "scope team-a namespaces=a,b\nscope team-b namespaces=a,c\n")
	want := map[string]string{
		f.tokens[auth.Viewer]: "a:deployment/shared b:deployment/mine",
		f.other[auth.Viewer]:  "a:deployment/shared c:deployment/secret",
	}
	for round := range 3 {
		for _, tok := range []string{f.tokens[auth.Viewer], f.other[auth.Viewer]} {
			ls, err := f.client.ListServices(withToken(tok), &fluxdv1.ListServicesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := sortedIDs(ls); got != want[tok] {
				t.Errorf("round %d: a caller of scope %q got %s", round, want[tok], got)
			}
		}
	}
	// Each kept answer is still sent from its kept encoding (the codec
	// finds it), and that encoding is its own scope's.
	f.daemon.view.mu.Lock()
	answers := map[string]*keptAnswer{}
	for k, a := range f.daemon.view.answers {
		answers[k.scope] = a
	}
	f.daemon.view.mu.Unlock()
	for scope, want := range map[string]string{"namespaces=a,b": "a:deployment/shared b:deployment/mine", "namespaces=a,c": "a:deployment/shared c:deployment/secret"} {
		a := answers[scope]
		if a == nil {
			t.Fatalf("no kept answer for scope %s", scope)
		}
		b := f.daemon.encodedServices(a.protos)
		if b == nil {
			t.Fatalf("scope %s: the kept answer is not sent from its kept encoding", scope)
		}
		var ls fluxdv1.ListServicesResponse
		if err := proto.Unmarshal(b, &ls); err != nil {
			t.Fatal(err)
		}
		if got := sortedIDs(&ls); got != want {
			t.Errorf("scope %s: kept encoding holds %s, want %s", scope, got, want)
		}
		// A copy of the answer's services is not a kept answer.
		if f.daemon.encodedServices(append([]*fluxdv1.Service(nil), a.protos...)) != nil {
			t.Errorf("scope %s: a copy of the answer's services was taken for the kept answer", scope)
		}
	}
}
