package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/syncer"
)

// The scope suite's world: team a's service "web" in namespace a (file
// a/web.yaml), and another team's service "secret-api" in namespace b
// (b/secret-api.yaml), running images of reg.example/a/web and
// reg.example/b/secret-api. Team a's instance is scoped to namespace a.
var (
	scopeMine   = platform.ID{Namespace: "a", Kind: "deployment", Name: "web"}
	scopeTheirs = platform.ID{Namespace: "b", Kind: "deployment", Name: "secret-api"}
)

func scopeWorld() (*stubCluster, *gitrepo.Manifests) {
	c := &stubCluster{workloads: []platform.Workload{
		{ID: scopeMine, Containers: []platform.Container{{Name: "app", Image: "reg.example/a/web:1"}}, Status: "ready"},
		{ID: scopeTheirs, Containers: []platform.Container{{Name: "app", Image: "reg.example/b/secret-api:1"}}, Status: "ready"},
	}}
	m := &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{
		scopeMine:   {ID: scopeMine, File: "a/web.yaml", Containers: []gitrepo.Container{{Name: "app", Image: "reg.example/a/web:1"}}, Annotations: map[string]string{}},
		scopeTheirs: {ID: scopeTheirs, File: "b/secret-api.yaml", Containers: []gitrepo.Container{{Name: "app", Image: "reg.example/b/secret-api:1"}}, Annotations: map[string]string{}},
	}}
	return c, m
}

// scopeReleaser plans as the release engine picks its targets (every
// definition with All, else the services named; then the spec's scope,
// as release.Engine.Plan does: TestPlan covers the engine's own), and
// records what it was asked.
type scopeReleaser struct {
	stubReleaser
	m     *gitrepo.Manifests
	specs chan release.Spec
}

func (r scopeReleaser) Manifests(context.Context) (string, *gitrepo.Manifests, error) {
	return "rev", r.m, nil
}

func (r scopeReleaser) Plan(_ context.Context, spec release.Spec) (*release.Plan, error) {
	select {
	case r.specs <- spec:
	default:
	}
	targets := spec.Services
	if spec.All {
		targets = nil
		for id := range r.m.Workloads {
			targets = append(targets, id)
		}
	}
	p := &release.Plan{Revision: "rev"}
	for _, id := range targets {
		if def := r.m.Workloads[id]; def != nil && spec.Scope.Contains(id.Namespace, def.File) {
			p.Items = append(p.Items, release.Item{Service: id, Action: release.UpToDate})
		}
	}
	return p, nil
}

// scopeSync is a sync whose last report holds both teams' objects.
type scopeSync struct{}

func (scopeSync) Sync(context.Context, bool, bool) (*syncer.Report, error) {
	return scopeSync{}.Last(), nil
}
func (scopeSync) Running() bool { return true }

// scopeSyncStarts counts the syncs started without waiting (--no-wait).
var scopeSyncStarts atomic.Int32

func (scopeSync) Start() error { scopeSyncStarts.Add(1); return nil }
func (scopeSync) Last() *syncer.Report {
	return &syncer.Report{Revision: "rev", Results: []platform.ObjectResult{
		{Ref: platform.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "a", Name: "web"}, Action: platform.ActionUnchanged},
		{Ref: platform.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "b", Name: "secret-api"}, Action: platform.ActionUnchanged},
	}}
}

// stubImages lists one image per repository.
type stubImages struct{}

func (stubImages) Images(_ context.Context, repo string) ([]registry.Image, error) {
	return []registry.Image{{Repository: repo, Tag: "1"}}, nil
}

// scopedFixture is newFixtureWith, team-a's instance scoped to namespace
// a, with both teams' history recorded in a real SQLite file.
func scopedFixture(t *testing.T) (*fixture, chan release.Spec) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	now := time.Now()
	for _, ev := range []history.Event{
		// Recorded before team a was scoped: it names both.
		{Instance: "team-a", Type: history.Release, Services: []string{scopeMine.String(), scopeTheirs.String()}, User: "alice", StartedAt: now,
			Changes: []history.Change{{Service: scopeMine.String(), To: "reg.example/a/web:2"}, {Service: scopeTheirs.String(), To: "reg.example/b/secret-api:2"}}},
		{Instance: history.SyncInstance, Type: history.Sync, Services: []string{scopeTheirs.String()}, Message: "secret-api synced", StartedAt: now},
		{Instance: history.SyncInstance, Type: history.Sync, Message: "a sync of secret-api failed as a whole", StartedAt: now},
	} {
		if _, err := store.Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	cluster, m := scopeWorld()
	specs := make(chan release.Spec, 1)
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: scopeReleaser{m: m, specs: specs}, Jobs: stubJobs{}, History: store, Sync: scopeSync{}, Images: stubImages{}})
	fh, err := os.OpenFile(f.tokensFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString("scope team-a namespaces=a\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	return f, specs
}

// aimAt sets every field of a request that names a service, a file or
// an image to service name in namespace b, at any depth.
func aimAt(m protoreflect.Message, name string) {
	id := platform.ID{Namespace: "b", Kind: "deployment", Name: name}
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.Kind() == protoreflect.StringKind && !fd.IsList():
			switch fd.Name() {
			case "service", "namespace":
				v := id.String()
				if fd.Name() == "namespace" {
					v = id.Namespace
				}
				m.Set(fd, protoreflect.ValueOfString(v))
			case "image":
				m.Set(fd, protoreflect.ValueOfString("reg.example/b/"+name+":2"))
			case "message", "lock_message":
				m.Set(fd, protoreflect.ValueOfString("scope test"))
			case "user":
				m.Set(fd, protoreflect.ValueOfString("mallory"))
			}
		case fd.Kind() == protoreflect.StringKind && fd.IsList():
			switch fd.Name() {
			case "services":
				m.Mutable(fd).List().Append(protoreflect.ValueOfString(id.String()))
			case "files":
				m.Mutable(fd).List().Append(protoreflect.ValueOfString("b/" + name + ".yaml"))
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap():
			aimAt(m.Mutable(fd).Message(), name)
		}
	}
}

// Every RPC of FluxService, from its descriptor, called by a scoped
// instance's admin with every service, file, namespace and image field
// naming the other team's service: each answers exactly as it does for a
// service that does not exist (same code, same message but for the name
// the caller typed), so nothing about it shows (not its running image,
// not its file); a call about it is "not found" as another instance's
// job is; and the sync, which applies every team's objects, is refused. The
// same calls by an unscoped instance do reach the service, so the suite
// cannot pass by refusing everything. A method added later must be
// classified here.
func TestEveryRPCKeepsToTheCallersScope(t *testing.T) {
	f, _ := scopedFixture(t)
	sd := fluxService(t)
	// want is the code a scoped caller gets for a call aimed at the other
	// team's service.
	want := map[protoreflect.Name]codes.Code{
		"Version": codes.OK, "Identity": codes.FailedPrecondition,
		"ListServices": codes.OK, "History": codes.NotFound, "ListJobs": codes.OK,
		"ListImages": codes.NotFound, "Release": codes.NotFound,
		"Automate": codes.NotFound, "Deautomate": codes.NotFound, "Lock": codes.NotFound, "Unlock": codes.NotFound, "SetPolicy": codes.NotFound,
		"NotifyImage": codes.NotFound,
		// Jobs are the instance's own: an ID that is not one of them is
		// not found, whatever the scope.
		"GetJob": codes.NotFound, "WatchJob": codes.NotFound, "CancelJob": codes.NotFound, "GetJobLog": codes.Unimplemented,
		"Sync": codes.PermissionDenied,
		// A workload's pods, logs and manifest: another team's workload,
		// and so its pods, are not found.
		"GetResources": codes.NotFound, "GetPodLog": codes.NotFound, "GetManifest": codes.NotFound,
		// This fixture runs no pipelines: every promotion call says so,
		// whoever calls (promotion_test.go has the scoped stages).
		"ListPipelines": codes.Unimplemented, "ListStages": codes.Unimplemented, "ListBundles": codes.Unimplemented,
		"Promote": codes.Unimplemented, "Approve": codes.Unimplemented, "ResumeStage": codes.Unimplemented,
	}
	// What the caller did not type: the service's running image, its
	// file in git, its status.
	leaks := []string{"reg.example/b/NAME:1"}
	for i := 0; i < sd.Methods().Len(); i++ {
		m := sd.Methods().Get(i)
		t.Run(string(m.Name()), func(t *testing.T) {
			code, ok := want[m.Name()]
			if !ok {
				t.Fatalf("%s is not classified in this suite: say what a scoped caller gets", m.Name())
			}
			aimed := func(name string) proto.Message {
				req := newRequest(t, m)
				aimAt(req.ProtoReflect(), name)
				switch r := req.(type) {
				case *fluxdv1.ReleaseRequest:
					r.Kind = fluxdv1.ReleaseKind_RELEASE_KIND_PLAN
				case *fluxdv1.PromoteRequest:
					r.Kind = fluxdv1.ReleaseKind_RELEASE_KIND_PLAN
				case *fluxdv1.SetPolicyRequest:
					r.Automated = ptr(true)
				}
				return req
			}
			answer := func(name string) (codes.Code, string) {
				resp, err := invokeResp(withToken(f.tokens[auth.Admin]), t, f.conn, m, aimed(name))
				text := status.Convert(err).Message()
				if resp != nil {
					text += prototext.Format(resp)
				}
				return status.Code(err), strings.ReplaceAll(text, name, "NAME")
			}
			gotCode, got := answer("secret-api")
			if gotCode != code {
				t.Errorf("scoped caller: %v %s, want %v", gotCode, got, code)
			}
			if noneCode, none := answer("no-such-api"); gotCode != noneCode || got != none {
				t.Errorf("the answer about the other team's service differs from one about no service:\n%v %s\nvs\n%v %s", gotCode, got, noneCode, none)
			}
			for _, l := range leaks {
				if strings.Contains(got, l) {
					t.Errorf("the scoped caller's answer mentions %q:\n%s", l, got)
				}
			}
			req := aimed("secret-api")
			// The unscoped instance reaches the service.
			_, err := invokeResp(withToken(f.other[auth.Admin]), t, f.conn, m, req)
			if code == codes.NotFound && status.Code(err) == codes.NotFound && !strings.Contains(string(m.Name()), "Job") {
				t.Errorf("unscoped caller: %v; the service should be found", err)
			}
		})
	}
}

// invokeResp is invoke that also returns the answer (a stream's first).
func invokeResp(ctx context.Context, t *testing.T, conn interface {
	Invoke(context.Context, string, any, any, ...grpc.CallOption) error
	NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error)
}, m protoreflect.MethodDescriptor, req proto.Message) (proto.Message, error) {
	t.Helper()
	full := "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	if err != nil {
		t.Fatal(err)
	}
	resp := mt.New().Interface()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if !m.IsStreamingClient() && !m.IsStreamingServer() {
		if err := conn.Invoke(ctx, full, req, resp); err != nil {
			return nil, err
		}
		return resp, nil
	}
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: m.IsStreamingServer(), ClientStreams: m.IsStreamingClient()}, full)
	if err != nil {
		return nil, err
	}
	_ = st.SendMsg(req)
	_ = st.CloseSend()
	if err := st.RecvMsg(resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// What a scoped caller does see: its own service, in list-services and
// by name; its history trimmed to it; a release of all planned within its
// scope (the spec carries the scope to the job); the events of others'
// services left out; and an unscoped caller sees both teams.
func TestScopedCallerSeesItsOwnServices(t *testing.T) {
	f, specs := scopedFixture(t)
	ctx := withToken(f.tokens[auth.Deployer])
	ls, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := serviceIDs(ls); got != scopeMine.String() {
		t.Errorf("scoped list-services = %s, want only %s", got, scopeMine)
	}
	if ls, err := f.client.ListServices(withToken(f.other[auth.Viewer]), &fluxdv1.ListServicesRequest{}); err != nil || serviceIDs(ls) != scopeMine.String()+" "+scopeTheirs.String() {
		t.Errorf("unscoped list-services = %v, %v; want both teams'", serviceIDs(ls), err)
	}
	// Asked again (the view is kept), the scoped answer stays scoped, and
	// the unscoped one whole.
	if ls, _ := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{}); serviceIDs(ls) != scopeMine.String() {
		t.Errorf("scoped list-services, again: %s", serviceIDs(ls))
	}
	if _, err := f.client.ListImages(ctx, &fluxdv1.ListImagesRequest{Service: "web"}); err != nil {
		t.Errorf("list-images of its own service: %v", err)
	}
	resp, err := f.client.Release(ctx, &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN, Spec: &fluxdv1.ReleaseSpec{All: true, AllLatest: true}})
	if err != nil {
		t.Fatal(err)
	}
	if items := resp.GetPlan().GetItems(); len(items) != 1 || items[0].GetService() != scopeMine.String() {
		t.Errorf("release --all by a scoped caller planned %v", items)
	}
	if spec := <-specs; spec.Scope == nil || fmt.Sprint(spec.Scope.Namespaces) != "[a]" {
		t.Errorf("the release's spec carries scope %v, want namespaces [a]", spec.Scope)
	}
	h, err := f.client.History(ctx, &fluxdv1.HistoryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GetEvents()) != 1 || fmt.Sprint(h.GetEvents()[0].GetServices()) != "["+scopeMine.String()+"]" {
		t.Errorf("scoped history = %v, want team a's release trimmed to %s", h.GetEvents(), scopeMine)
	}
	if h, _ := f.client.History(withToken(f.other[auth.Viewer]), &fluxdv1.HistoryRequest{}); len(h.GetEvents()) != 2 {
		t.Errorf("unscoped team b sees %d events, want the sync's 2", len(h.GetEvents()))
	}
}

func serviceIDs(ls *fluxdv1.ListServicesResponse) string {
	var ids []string
	for _, s := range ls.GetServices() {
		ids = append(ids, s.GetId())
	}
	return strings.Join(ids, " ")
}

// A scoped caller may not start a sync without waiting for it either: a
// sync applies every team's objects (found by review: --no-wait skipped
// the check).
func TestScopedCallerCannotStartASync(t *testing.T) {
	f, _ := scopedFixture(t)
	before := scopeSyncStarts.Load()
	_, err := f.client.Sync(withToken(f.tokens[auth.Admin]), &fluxdv1.SyncRequest{NoWait: true})
	if status.Code(err) != codes.PermissionDenied || scopeSyncStarts.Load() != before {
		t.Errorf("scoped sync --no-wait: %v, %d started; want PermissionDenied and none", err, scopeSyncStarts.Load()-before)
	}
}
