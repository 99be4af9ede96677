package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
)

// serviceMutators change one field of a Service each, to a new value
// (never modifying what the old value shares), keyed by field name.
func serviceMutators(r *rand.Rand) map[string]func(*Service) {
	word := func() string { return []string{"", "a", "b", "ready", "updating", "x:1"}[r.IntN(6)] }
	strs := func() []string {
		var out []string
		for range r.IntN(3) {
			out = append(out, word())
		}
		return out
	}
	smap := func() map[string]string {
		if r.IntN(3) == 0 {
			return nil
		}
		m := map[string]string{}
		for range r.IntN(3) {
			m[word()] = word()
		}
		return m
	}
	at := func() time.Time {
		if r.IntN(2) == 0 {
			return time.Time{}
		}
		return time.Unix(1_700_000_000+int64(r.IntN(3)), 0)
	}
	return map[string]func(*Service){
		"ID":        func(s *Service) { s.ID = platform.ID{Namespace: word(), Kind: "deployment", Name: word()} },
		"Status":    func(s *Service) { s.Status = word() },
		"Replicas":  func(s *Service) { s.Replicas = platform.Replicas{Desired: int32(r.IntN(3)), Ready: int32(r.IntN(3))} },
		"InGit":     func(s *Service) { s.InGit = r.IntN(2) == 0 },
		"InCluster": func(s *Service) { s.InCluster = r.IntN(2) == 0 },
		"Automated": func(s *Service) { s.Automated = r.IntN(2) == 0 },
		"Locked":    func(s *Service) { s.Locked = r.IntN(2) == 0 },
		"LockMsg":   func(s *Service) { s.LockMsg = word() },
		"Containers": func(s *Service) {
			var cs []platform.Container
			for range r.IntN(3) {
				cs = append(cs, platform.Container{Name: word(), Image: word(), Init: r.IntN(2) == 0})
			}
			s.Containers = cs
		},
		"Filters":    func(s *Service) { s.Filters = smap() },
		"TagOrder":   func(s *Service) { s.TagOrder = word() },
		"Prerelease": func(s *Service) { s.Prerelease = r.IntN(2) == 0 },
		"Automation": func(s *Service) {
			if r.IntN(3) == 0 {
				s.Automation = nil
				return
			}
			s.Automation = &automator.Status{State: automator.State(word()), Next: at(), JobID: word(), LastError: word(),
				Failures: r.IntN(2), Decision: word(), LastCheck: at(), Warnings: strs()}
		},
		"Warnings":   func(s *Service) { s.Warnings = strs() },
		"Goals":      func(s *Service) { s.Goals = smap() },
		"SyncState":  func(s *Service) { s.SyncState = word() },
		"SyncDetail": func(s *Service) { s.SyncDetail = word() },
		"def":        func(s *Service) { s.def = &gitrepo.Definition{File: word()} },
		"GitImages":  func(s *Service) { s.GitImages = smap() },
		"annotations": func(s *Service) {
			m := smap()
			if r.IntN(2) == 0 {
				if m == nil {
					m = map[string]string{}
				}
				m[release.AnnotationLockedBy] = word()
				m[release.AnnotationLockedAt] = []string{"", "2026-12-01T15:00:00Z", "2026-12-01T16:00:00Z"}[r.IntN(3)]
			}
			s.annotations = m
		},
	}
}

// Every field of Service has a mutator below, so a new field cannot
// escape the randomized test of sameService.
func TestSameServiceCoversEveryField(t *testing.T) {
	muts := serviceMutators(rand.New(rand.NewPCG(1, 1)))
	for _, f := range reflect.VisibleFields(reflect.TypeFor[Service]()) {
		if _, ok := muts[f.Name]; !ok {
			t.Errorf("Service.%s has no mutator in serviceMutators: add one, and compare it in sameService if serviceToProto reads it", f.Name)
		}
	}
}

// Seeded random pairs of services, a few fields apart: whenever
// sameService says two services are the same, they convert to the same
// answer (a kept answer is never stale), and it tells most changed pairs
// apart (the memo is not a no-op).
func TestSameServiceRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	muts := serviceMutators(r)
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range muts {
			if !yield(k) {
				return
			}
		}
	})
	differ, told := 0, 0
	for range 20000 {
		var a Service
		for _, n := range names {
			if r.IntN(2) == 0 {
				muts[n](&a)
			}
		}
		b := a
		for range 1 + r.IntN(3) {
			muts[names[r.IntN(len(names))]](&b)
		}
		same := sameService(a, b)
		equal := proto.Equal(serviceToProto(a), serviceToProto(b))
		if same && !equal {
			t.Fatalf("seed %d: sameService says the same, but they convert apart:\n%s", seed,
				cmp.Diff(serviceToProto(a), serviceToProto(b), protocmp.Transform()))
		}
		if !equal {
			differ++
			if !same {
				told++
			}
		}
	}
	if differ == 0 || told != differ {
		t.Errorf("of %d pairs that convert apart, sameService told %d apart", differ, told)
	}
}

// Seeded random changes of a cluster, view after view: the answers made
// from kept services (protobuf, its kept encoding and the JSON API's
// answer) are those of a daemon that converts every service afresh.
func TestKeptAnswersFollowChangesRandom(t *testing.T) {
	// Every answer must show the change before it: no view may lag
	// (viewlag.go), however slowly this machine builds one (under -race
	// on loaded cores a build of 200 took past minLagCost, and an answer
	// came one view behind).
	was := minLagCost
	t.Cleanup(func() { minLagCost = was }) // after the fixtures' own cleanups
	minLagCost = time.Hour
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, seed))
	ws := workloadsIn(200, 5)
	kept := &atomicGenCluster{stubCluster: stubCluster{workloads: ws}}
	fresh := &stubCluster{workloads: ws}
	fk := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: kept, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: &stubGit{}})
	ff := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: fresh, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: &stubGit{}})
	kctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+fk.tokens[auth.Viewer])
	fctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+ff.tokens[auth.Viewer])
	next := 200
	for step := range 60 {
		ws = slices.Clone(ws)
		for range r.IntN(5) {
			i := r.IntN(len(ws))
			switch r.IntN(5) {
			case 0:
				ws[i].Containers = []platform.Container{{Name: "app", Image: fmt.Sprintf("reg.example/app:1.%d", r.IntN(4))}}
			case 1:
				ws[i].Status = []string{"ready", "updating"}[r.IntN(2)]
			case 2:
				ws[i].Replicas = platform.Replicas{Desired: 2, Ready: int32(r.IntN(3))}
			case 3:
				ws = slices.Delete(ws, i, i+1)
			case 4:
				ws = append(ws, platform.Workload{ID: platform.ID{Namespace: fmt.Sprintf("ns-%d", r.IntN(6)), Kind: "deployment", Name: fmt.Sprintf("app-%d", next)},
					Containers: []platform.Container{{Name: "app", Image: "reg.example/app:1.0"}}, Status: "ready"})
				next++
			}
		}
		kept.workloads, fresh.workloads = ws, ws
		kept.gen.Add(1)
		for _, ns := range []string{"", fmt.Sprintf("ns-%d", r.IntN(6))} {
			want, err := ff.client.ListServices(fctx, &fluxdv1.ListServicesRequest{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			got, err := fk.client.ListServices(kctx, &fluxdv1.ListServicesRequest{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.Services, got.Services, protocmp.Transform()); diff != "" {
				t.Fatalf("seed %d, step %d, namespace %q (-fresh +kept):\n%s", seed, step, ns, diff)
			}
			b, isJSON := listJSON(t, fk, kctx, ns)
			if !isJSON {
				t.Fatalf("step %d: the JSON API's answer did not come as JSON", step)
			}
			var fromJSON fluxdv1.ListServicesResponse
			if err := protojson.Unmarshal(b, &fromJSON); err != nil {
				t.Fatalf("step %d: the kept JSON does not parse: %v", step, err)
			}
			if diff := cmp.Diff(want.Services, fromJSON.Services, protocmp.Transform()); diff != "" {
				t.Fatalf("seed %d, step %d, namespace %q, JSON (-fresh +kept):\n%s", seed, step, ns, diff)
			}
		}
	}
}

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

// The kept view's answer, sent from its kept encoding, decodes as the
// answer built afresh, the git remote's state included.
func TestListServicesFromTheKeptEncoding(t *testing.T) {
	var ws []platform.Workload
	for i := range 20 {
		ws = append(ws, platform.Workload{ID: platform.ID{Namespace: fmt.Sprintf("ns-%d", i%2), Kind: "deployment", Name: fmt.Sprintf("app-%d", i)},
			Containers: []platform.Container{{Name: "app", Image: "reg.example/app:1.0"}}, Status: "ready"})
	}
	kept := &genCluster{stubCluster: stubCluster{workloads: ws}}
	fresh := &stubCluster{workloads: ws}
	fk := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: kept, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: &stubGit{}})
	ff := newFixtureWith(t, Config{GitRefresh: time.Minute}, Deps{Cluster: fresh, Releaser: stubReleaser{}, Jobs: stubJobs{}, Git: &stubGit{}})
	for _, ns := range []string{"", "ns-1", "", "ns-1"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+fk.tokens[auth.Viewer])
		got, err := fk.client.ListServices(ctx, &fluxdv1.ListServicesRequest{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		ctx = metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+ff.tokens[auth.Viewer])
		want, err := ff.client.ListServices(ctx, &fluxdv1.ListServicesRequest{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
			t.Errorf("namespace %q (-fresh +kept):\n%s", ns, diff)
		}
		if got.GetGit() == nil {
			t.Errorf("namespace %q: no git state in the answer", ns)
		}
	}
}
