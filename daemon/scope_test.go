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

	"io"
	"log/slog"

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

// dirClone is a git clone that is a plain directory (the sync reads it).
type dirClone struct{ root, rev string }

func (c dirClone) Exclusive(_ context.Context, fn func() error) error { return fn() }
func (c dirClone) Read(_ context.Context, _, _ bool, fn func(rev, root string, paths []string) error) error {
	return fn(c.rev, c.root, []string{"."})
}

// refusingApplier creates every object but those whose name says
// "broken", which the API server refuses with a message naming them.
type refusingApplier struct{}

func (refusingApplier) Apply(_ context.Context, objs []platform.Object, _ platform.SyncOptions) ([]platform.ObjectResult, error) {
	var out []platform.ObjectResult
	for _, o := range objs {
		r := platform.ObjectResult{Ref: o.Ref(), Where: o.Where(), Action: platform.ActionCreated}
		if strings.Contains(o.Ref().Name, "broken") {
			r.Action, r.Error = platform.ActionFailed, "admission webhook denied "+o.Ref().Name+": reason-"+o.Ref().Namespace
		}
		out = append(out, r)
	}
	return out, nil
}

// syncInto runs one real sync of the files into store's history.
func syncInto(t *testing.T, store *sqlite.Store, rev string, files map[string]string) {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := syncer.New(syncer.Config{Interval: time.Minute}, dirClone{root: root, rev: rev}, refusingApplier{}, store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if _, err := s.Sync(context.Background(), false, false); err != nil {
		t.Fatal(err)
	}
}

func object(kind, ns, name string) string {
	apiVersion := "v1"
	switch kind {
	case "Deployment":
		apiVersion = "apps/v1"
	case "ClusterRole":
		apiVersion = "rbac.authorization.k8s.io/v1"
	}
	meta := "name: " + name
	if ns != "" {
		meta += ", namespace: " + ns
	}
	return "apiVersion: " + apiVersion + "\nkind: " + kind + "\nmetadata: {" + meta + "}\n"
}

// Every event type, recorded as it names both teams (team a's service
// web in namespace a, and team b's: its service secret-api, its
// ConfigMaps, one of which the API server refuses with a message naming
// it, a cluster-scoped ClusterRole, a file that cannot be read), read by
// team a's scoped viewer through History: each type is shown to it (so
// the suite cannot pass by showing nothing), and nothing of team b shows
// in any field: not its services, image changes, object names,
// namespaces, files or error text. A sync's message and error are
// rendered from team a's objects alone, its own failure included; a sync
// of team b's objects alone is not shown; a sync recorded by an earlier
// fluxd, without its objects, shows no text. The same history read by
// an unscoped instance shows team b's, so the fixture does hold them.
// A type added to history.Types is walked here too; one the suite cannot
// record naming both teams fails it.
func TestEveryEventKeepsToTheCallersScope(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	mine, theirs := scopeMine.String(), scopeTheirs.String()
	for _, typ := range history.Types {
		if typ == history.Sync {
			continue
		}
		ev := history.Event{Instance: "team-a", Type: typ, Services: []string{mine, theirs}, User: "alice", Message: "by alice",
			Changes: []history.Change{
				{Service: mine, Container: "app", To: "reg.example/a/web:2",
					Verification: &history.Verification{Outcome: "verified", Profiles: []string{"team-a"}, Digest: "sha256:aaaa", Detail: "profile team-a: verified by key sha256:aaaa (/etc/fluxd/team-a.pub)"}},
				// Team b's verification names its profile, key file and
				// digest: none of it reaches team a.
				{Service: theirs, Container: "app", To: "reg.example/b/secret-api:2",
					Verification: &history.Verification{Outcome: "failed", Profiles: []string{"bsecret-profile"}, Digest: "sha256:bsecret", Detail: "profile bsecret-profile: failed (wrong-key): reason-b"}},
			}}
		switch typ {
		case history.Failed, history.Rollback, history.Cancelled:
			ev.Error = "rolling out " + theirs + " failed: bsecret-reason"
		}
		if _, err := store.Record(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	// Recorded by an earlier fluxd: its text names both teams' objects.
	if _, err := store.Record(ctx, history.Event{Instance: history.SyncInstance, Type: history.Sync, User: "fluxd", Commit: "0ld",
		Services: []string{mine, theirs}, Message: "Sync of 0ld: 2 created\ncreated ConfigMap/b/bsecret-old", Error: "ConfigMap/b/bsecret-old: bsecret-reason"}); err != nil {
		t.Fatal(err)
	}
	// One commit with both teams' objects; then one with team b's alone.
	syncInto(t, store, "1111111111111111", map[string]string{
		"a/web.yaml":         object("Deployment", "a", "web") + "---\n" + object("ConfigMap", "a", "web-broken"),
		"b/secret-api.yaml":  object("Deployment", "b", "secret-api"),
		"b/bsecret.yaml":     object("ConfigMap", "b", "bsecret-token") + "---\n" + object("ConfigMap", "b", "bsecret-broken"),
		"b/bsecret-bad.yaml": "kind: [not yaml",
		"cluster/role.yaml":  object("ClusterRole", "", "bsecret-role"),
	})
	syncInto(t, store, "2222222222222222", map[string]string{"b/bsecret.yaml": object("ConfigMap", "b", "bsecret-only")})

	cluster, m := scopeWorld()
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: scopeReleaser{m: m, specs: make(chan release.Spec, 1)}, Jobs: stubJobs{}, History: store, Sync: scopeSync{}, Images: stubImages{}})
	fh, err := os.OpenFile(f.tokensFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString("scope team-a namespaces=a\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()

	// Team b's, in any form it could take in an answer.
	leaks := []string{"bsecret", "secret-api", "reason-b", "ClusterRole", "/b/", "b/", " b:", "b:deployment"}
	for _, req := range []*fluxdv1.HistoryRequest{{}, {Service: "web"}, {Type: string(history.Sync)}} {
		h, err := f.client.History(withToken(f.tokens[auth.Viewer]), req)
		if err != nil {
			t.Fatalf("History %v: %v", req, err)
		}
		for _, ev := range h.GetEvents() {
			text := prototext.Format(ev)
			for _, l := range leaks {
				if strings.Contains(text, l) {
					t.Errorf("History %v: team a's viewer reads %q in a %s event:\n%s", req, l, ev.GetType(), text)
				}
			}
		}
	}
	h, err := f.client.History(withToken(f.tokens[auth.Viewer]), &fluxdv1.HistoryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]*fluxdv1.Event{}
	for _, ev := range h.GetEvents() {
		seen[ev.GetType()] = append(seen[ev.GetType()], ev)
		if got := strings.Join(ev.GetServices(), " "); ev.GetType() != string(history.Sync) && got != mine {
			t.Errorf("a %s event names services %q, want only %s", ev.GetType(), got, mine)
		}
	}
	for _, typ := range history.Types {
		if len(seen[string(typ)]) == 0 {
			t.Errorf("team a's viewer sees no %s event; it should see its own part of one", typ)
		}
	}
	// Its own released image keeps its verification.
	if rel := seen[string(history.Release)]; len(rel) == 1 {
		if ch := rel[0].GetChanges(); len(ch) != 1 || ch[0].GetVerification().GetOutcome() != "verified" || ch[0].GetVerification().GetDigest() != "sha256:aaaa" {
			t.Errorf("team a's release shows changes %v; want its own image with its verification", ch)
		}
	}
	if syncs := seen[string(history.Sync)]; len(syncs) != 2 {
		t.Errorf("team a's viewer sees %d sync events, want 2 (the one with its objects, and the earlier fluxd's naming its service); not the sync of team b's alone", len(syncs))
	} else {
		now, old := syncs[0], syncs[1]
		wantMsg := "Sync of 111111111111: 1 created, 0 changed, 0 deleted; 1 failed\ncreated Deployment/a/web"
		if now.GetMessage() != wantMsg || !strings.Contains(now.GetError(), "a/web.yaml:") || !strings.HasSuffix(now.GetError(), "ConfigMap/a/web-broken: admission webhook denied web-broken: reason-a") {
			t.Errorf("team a's view of the sync:\nmessage %q\nerror %q\nwant message %q and its own failure as the error", now.GetMessage(), now.GetError(), wantMsg)
		}
		if strings.Join(now.GetServices(), " ") != mine {
			t.Errorf("team a's view of the sync names services %v, want %s", now.GetServices(), mine)
		}
		if strings.Contains(old.GetMessage(), "created") || !strings.Contains(old.GetError(), "not shown") {
			t.Errorf("team a's view of the earlier fluxd's sync: %q / %q; want no objects and no failures", old.GetMessage(), old.GetError())
		}
	}
	// The unscoped instance reads team b's objects: the fixture holds them.
	all, err := f.client.History(withToken(f.other[auth.Viewer]), &fluxdv1.HistoryRequest{Type: string(history.Sync)})
	if err != nil {
		t.Fatal(err)
	}
	text := prototext.Format(all)
	for _, want := range []string{"created ConfigMap/b/bsecret-token", "ConfigMap/b/bsecret-broken: admission webhook denied bsecret-broken", "created ClusterRole/bsecret-role", "b/bsecret-bad.yaml", "bsecret-only"} {
		if !strings.Contains(text, want) {
			t.Errorf("the unscoped instance's history lacks %q:\n%s", want, text)
		}
	}
}

// A Flux v2 ImagePolicy of team a's namespace whose marker sits in team
// b's file, on team b's Deployment, is not team a's to see: its service's
// containers are b's fields (file, object, image). The release engine
// leaves such a service out of a scoped plan (release.InScope); list-services
// and every call naming it leave it out as well, kept answers included.
// So with a HelmRelease of a's namespace whose spec.targetNamespace is b.
func TestScopedCallerDoesNotSeeAPolicyMarkingAnotherTeamsField(t *testing.T) {
	cluster, m := scopeWorld()
	policy := platform.ID{Namespace: "a", Kind: "imagepolicy", Name: "shared"}
	field := "b/secret-api.yaml:Deployment/b/secret-api:spec.template.spec.containers[0].image"
	m.Workloads[policy] = &gitrepo.Definition{ID: policy, File: "a/policy.yaml", Format: gitrepo.FormatSetters,
		Containers:  []gitrepo.Container{{Name: field, Image: "reg.example/b/secret-api:1"}},
		Annotations: map[string]string{},
		ImagePolicy: &gitrepo.ImagePolicy{NSName: gitrepo.NSName{Namespace: "a", Name: "shared"}, File: "a/policy.yaml", SemverRange: ">=1"},
		Setters:     []gitrepo.Setter{{Field: field, File: "b/secret-api.yaml", Namespace: "b", Policy: gitrepo.NSName{Namespace: "a", Name: "shared"}, Value: "reg.example/b/secret-api:1"}},
	}
	// And a HelmRelease of namespace a that installs into b.
	hr := platform.ID{Namespace: "a", Kind: platform.KindHelmRelease, Name: "into-b"}
	m.Workloads[hr] = &gitrepo.Definition{ID: hr, File: "a/hr.yaml", Format: gitrepo.FormatHelm, Annotations: map[string]string{}, InstallsInto: []string{"b"},
		Containers: []gitrepo.Container{{Name: "chart-image", Image: "reg.example/b/secret-api:1"}}}
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: scopeReleaser{m: m}, Jobs: stubJobs{}, Images: stubImages{}})
	fh, err := os.OpenFile(f.tokensFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString("scope team-a namespaces=a\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	ctx := withToken(f.tokens[auth.Viewer])
	for range 2 { // the second answer is the kept one
		ls, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got := serviceIDs(ls); got != scopeMine.String() {
			t.Errorf("team a's list-services = %s, want only %s", got, scopeMine)
		}
		if strings.Contains(ls.String(), "secret-api") {
			t.Errorf("team a's list-services shows team b's field: %s", ls)
		}
	}
	if _, err := f.client.ListImages(ctx, &fluxdv1.ListImagesRequest{Service: policy.String()}); err == nil {
		t.Errorf("team a may list the images of a policy that marks team b's field")
	}
	if _, err := f.client.ListImages(ctx, &fluxdv1.ListImagesRequest{Service: hr.String()}); err == nil {
		t.Errorf("team a may list the images of a HelmRelease that installs into b")
	}
	// Unscoped, it is there.
	ls, err := f.client.ListServices(withToken(f.other[auth.Viewer]), &fluxdv1.ListServicesRequest{})
	if err != nil || !strings.Contains(serviceIDs(ls), policy.String()) || !strings.Contains(serviceIDs(ls), hr.String()) {
		t.Errorf("unscoped list-services = %s, %v; want the policy's and the HelmRelease's services", serviceIDs(ls), err)
	}
}
