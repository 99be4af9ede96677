package daemon

import (
	"testing"
	"time"

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
}
