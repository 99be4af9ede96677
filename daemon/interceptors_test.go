package daemon

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/history/sqlite"
	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// readOnlyRPCs are the FluxService methods a viewer may call. This list is
// the only data the security suite keeps: every other method, including
// one added later, is taken to mutate and must refuse a viewer. (Release
// is here as a mutation: a viewer may only plan, and an empty request is
// not a plan.)
var readOnlyRPCs = map[protoreflect.Name]bool{
	"Version": true, "Identity": true, "ListServices": true, "ListImages": true, "GetJob": true,
	"WatchJob": true, "ListJobs": true, "History": true, "GetJobLog": true,
	// A workload's pods, events and manifest; not its pods' logs.
	"GetResources": true, "GetManifest": true,
	// Pipelines, stages and bundles; promoting, approving and resuming
	// are mutations.
	"ListPipelines": true, "ListStages": true, "ListBundles": true,
}

// fluxService is the service as its generated file describes it.
func fluxService(t *testing.T) protoreflect.ServiceDescriptor {
	t.Helper()
	sd := fluxdv1.File_fluxd_v1_fluxd_proto.Services().ByName("FluxService")
	if sd == nil || sd.Methods().Len() == 0 {
		t.Fatal("FluxService not found in the generated file descriptor")
	}
	return sd
}

// newRequest is an empty request of m's input type.
func newRequest(t *testing.T, m protoreflect.MethodDescriptor) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
	if err != nil {
		t.Fatalf("%s: %v", m.Input().FullName(), err)
	}
	return mt.New().Interface()
}

// invoke calls m over conn with req, unary or streaming, and returns the
// call's error (for a stream, the first receive's).
func invoke(ctx context.Context, t *testing.T, conn *grpc.ClientConn, m protoreflect.MethodDescriptor, req proto.Message) error {
	t.Helper()
	_, err := invokeResp(ctx, t, conn, m, req)
	return err
}

// refusedByAuth says whether an error is the interceptors' refusal, as
// opposed to a handler's answer to an empty request.
func refusedByAuth(err error) bool {
	c := status.Code(err)
	return c == codes.Unauthenticated || c == codes.PermissionDenied
}

// Every RPC of FluxService, taken from its descriptor: without a token,
// with a forged one, and with a viewer's for every mutating RPC, none is
// accepted. A viewer may call the read-only ones and a deployer every one
// (so the suite does not pass by refusing everything).
func TestEveryRPCRefusesCallersWithoutTheRole(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	sd := fluxService(t)
	for name := range readOnlyRPCs {
		if sd.Methods().ByName(name) == nil {
			t.Errorf("readOnlyRPCs names %s, which FluxService does not have", name)
		}
	}
	forged := "fxd_" + strings.Repeat("0", 40)
	accepted := 0
	for i := 0; i < sd.Methods().Len(); i++ {
		m := sd.Methods().Get(i)
		t.Run(string(m.Name()), func(t *testing.T) {
			cases := []struct {
				who  string
				ctx  context.Context
				want codes.Code
			}{
				{"no token", context.Background(), codes.Unauthenticated},
				{"forged token", withToken(forged), codes.Unauthenticated},
				{"empty bearer", metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "), codes.Unauthenticated},
				{"basic auth", metadata.AppendToOutgoingContext(context.Background(), "authorization", "Basic "+f.tokens[auth.Admin]), codes.Unauthenticated},
			}
			if !readOnlyRPCs[m.Name()] {
				cases = append(cases,
					struct {
						who  string
						ctx  context.Context
						want codes.Code
					}{"viewer", withToken(f.tokens[auth.Viewer]), codes.PermissionDenied},
					struct {
						who  string
						ctx  context.Context
						want codes.Code
					}{"other instance's viewer", withToken(f.other[auth.Viewer]), codes.PermissionDenied})
			}
			for _, tc := range cases {
				err := invoke(tc.ctx, t, f.conn, m, newRequest(t, m))
				if status.Code(err) != tc.want {
					accepted++
					t.Errorf("%s: %v, want %v", tc.who, err, tc.want)
				}
			}
			// The roles that may call it get past the interceptors.
			allowed := []string{f.tokens[auth.Deployer], f.tokens[auth.Admin]}
			if readOnlyRPCs[m.Name()] {
				allowed = append(allowed, f.tokens[auth.Viewer])
			}
			for _, tok := range allowed {
				if err := invoke(withToken(tok), t, f.conn, m, newRequest(t, m)); refusedByAuth(err) {
					t.Errorf("refused a caller with the role: %v", err)
				}
			}
		})
	}
	if accepted != 0 {
		t.Errorf("%d calls without the role were accepted", accepted)
	}
}

// setUsers sets every string field named "user" of a request, at any
// depth, to v, and reports whether there was one.
func setUsers(m protoreflect.Message, v string) bool {
	found := false
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.Name() == "user" && fd.Kind() == protoreflect.StringKind && fd.Cardinality() != protoreflect.Repeated:
			m.Set(fd, protoreflect.ValueOfString(v))
			found = true
		case fd.Kind() == protoreflect.MessageKind && fd.Cardinality() != protoreflect.Repeated && !fd.IsMap():
			if setUsers(m.Mutable(fd).Message(), v) {
				found = true
			} else {
				m.Clear(fd)
			}
		}
	}
	return found
}

// A user becomes a commit's author: every RPC that takes one, found in the
// descriptor, refuses a newline, another control character or a stray
// angle bracket in it (git's "Name <email>" form is accepted), with
// InvalidArgument and a message saying why.
func TestEveryRPCWithAUserRefusesHeaderInjection(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	sd := fluxService(t)
	var withUser []string
	for i := 0; i < sd.Methods().Len(); i++ {
		m := sd.Methods().Get(i)
		if !setUsers(newRequest(t, m).ProtoReflect(), "x") {
			continue
		}
		withUser = append(withUser, string(m.Name()))
		for _, bad := range []string{"eve\ncommitter forged <f@f> 0 +0000", "eve\r", "eve <eve@evil> <x@y>", "eve <not an address>", "eve <a@b>\nforged", "eve>", "nul\x00", "esc\x1b[31m"} {
			req := newRequest(t, m)
			setUsers(req.ProtoReflect(), bad)
			err := invoke(withToken(f.tokens[auth.Admin]), t, f.conn, m, req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "cannot be a commit's author") {
				t.Errorf("%s with user %q: %v; want InvalidArgument about the user", m.Name(), bad, err)
			}
		}
		// A plain name, and git's own author form as Flux v1's fluxctl sent it.
		for _, good := range []string{"Zoë O'Brien", "Jane Doe <jane@example.com>"} {
			req := newRequest(t, m)
			setUsers(req.ProtoReflect(), good)
			if err := invoke(withToken(f.tokens[auth.Admin]), t, f.conn, m, req); strings.Contains(status.Convert(err).Message(), "cannot be a commit's author") {
				t.Errorf("%s refused the user %q: %v", m.Name(), good, err)
			}
		}
	}
	// The suite must see the RPCs it is about.
	for _, want := range []string{"Release", "Automate", "Deautomate", "Lock", "Unlock", "SetPolicy"} {
		if !strings.Contains(" "+strings.Join(withUser, " ")+" ", " "+want+" ") {
			t.Errorf("no user field found in %s's request; found in %v", want, withUser)
		}
	}
}

// noExecutor never runs: the jobs stay queued.
type noExecutor struct{}

func (noExecutor) Execute(context.Context, string, release.Spec, history.Type, release.ExecOptions) (*release.Result, error) {
	return nil, errors.New("not run in this test")
}

func (noExecutor) Resume(context.Context, string, release.Spec, *release.Plan, string, history.Type, release.ExecOptions) (*release.Result, error) {
	return nil, errors.New("not run in this test")
}

func (noExecutor) FindJobCommit(context.Context, string) (string, error) { return "", nil }

// Instances isolate jobs and history: with a real job queue and a real
// SQLite history, another instance's tokens (any role) see none of team
// a's jobs or events and cannot cancel its job, while team a's own
// viewer sees them.
func TestAnotherInstanceSeesNoJobsOrHistory(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	q := jobs.NewQueue(noExecutor{}, store, time.Minute, false, slog.New(slog.DiscardHandler))
	f := newFixtureWith(t, Config{}, Deps{Cluster: &stubCluster{}, Releaser: stubReleaser{}, Jobs: q, History: store})

	job, err := q.Enqueue(ctx, "team-a", release.Spec{All: true, AllLatest: true, User: "alice"}, "")
	if err != nil {
		t.Fatal(err)
	}
	id := job.Job.ID
	if _, err := store.Record(ctx, history.Event{Instance: "team-a", Type: history.Release, User: "alice", Message: "ship", StartedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	visible := func(tok string) (seen []string) {
		c := withToken(tok)
		if _, err := f.client.GetJob(c, &fluxdv1.GetJobRequest{Id: id}); err == nil {
			seen = append(seen, "GetJob")
		} else if status.Code(err) != codes.NotFound {
			t.Errorf("GetJob: %v, want NotFound", err)
		}
		wctx, cancel := context.WithTimeout(c, 5*time.Second)
		defer cancel()
		if st, err := f.client.WatchJob(wctx, &fluxdv1.WatchJobRequest{Id: id}); err != nil {
			t.Errorf("WatchJob: %v", err)
		} else if _, err := st.Recv(); err == nil {
			seen = append(seen, "WatchJob")
		} else if status.Code(err) != codes.NotFound {
			t.Errorf("WatchJob: %v, want NotFound", err)
		}
		if resp, err := f.client.ListJobs(c, &fluxdv1.ListJobsRequest{}); err != nil {
			t.Errorf("ListJobs: %v", err)
		} else if len(resp.GetJobs()) > 0 {
			seen = append(seen, "ListJobs")
		}
		if resp, err := f.client.History(c, &fluxdv1.HistoryRequest{}); err != nil {
			t.Errorf("History: %v", err)
		} else if len(resp.GetEvents()) > 0 {
			seen = append(seen, "History")
		}
		return seen
	}
	for _, role := range []auth.Role{auth.Viewer, auth.Deployer, auth.Admin} {
		if seen := visible(f.other[role]); len(seen) != 0 {
			t.Errorf("team-b's %s sees team-a's job or history through %v", role, seen)
		}
		want := codes.NotFound // as if there were no such job
		if role == auth.Viewer {
			want = codes.PermissionDenied
		}
		if _, err := f.client.CancelJob(withToken(f.other[role]), &fluxdv1.CancelJobRequest{Id: id}); status.Code(err) != want {
			t.Errorf("team-b's %s cancelling team-a's job: %v, want %v", role, err, want)
		}
	}
	// The job is still queued, and team-a sees all of it.
	if u, err := q.Get(ctx, "team-a", id); err != nil || u.Job.State != history.JobQueued {
		t.Errorf("team-a's job after team-b's cancels: %v, %v", u.Job.State, err)
	}
	if seen := visible(f.tokens[auth.Viewer]); len(seen) != 4 {
		t.Errorf("team-a's viewer sees its own job and history only through %v", seen)
	}
}

// stubGit is a git remote whose state the test sets.
type stubGit struct{ err atomic.Value }

func (g *stubGit) Status() gitrepo.RemoteStatus {
	s, _ := g.err.Load().(string)
	return gitrepo.RemoteStatus{Error: s}
}

// setMessages sets every string field named "message" or "lock_message"
// of a request, at any depth, to v, and reports whether there was one.
func setMessages(m protoreflect.Message, v string) bool {
	found := false
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case (fd.Name() == "message" || fd.Name() == "lock_message") && fd.Kind() == protoreflect.StringKind && fd.Cardinality() != protoreflect.Repeated:
			m.Set(fd, protoreflect.ValueOfString(v))
			found = true
		case fd.Kind() == protoreflect.MessageKind && fd.Cardinality() != protoreflect.Repeated && !fd.IsMap():
			if setMessages(m.Mutable(fd).Message(), v) {
				found = true
			} else {
				m.Clear(fd)
			}
		}
	}
	return found
}

// A release or lock message goes into commits and the history: every RPC
// that takes one refuses a NUL or another control character (but a
// newline or a tab) with InvalidArgument, before anything is done.
func TestEveryRPCWithAMessageRefusesControlCharacters(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	sd := fluxService(t)
	var withMessage []string
	for i := 0; i < sd.Methods().Len(); i++ {
		m := sd.Methods().Get(i)
		if !setMessages(newRequest(t, m).ProtoReflect(), "x") {
			continue
		}
		withMessage = append(withMessage, string(m.Name()))
		for _, bad := range []string{"nul\x00", "esc\x1b[31m", "cr\r"} {
			req := newRequest(t, m)
			setMessages(req.ProtoReflect(), bad)
			err := invoke(withToken(f.tokens[auth.Admin]), t, f.conn, m, req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "control character") {
				t.Errorf("%s with message %q: %v; want InvalidArgument about the control character", m.Name(), bad, err)
			}
		}
		req := newRequest(t, m)
		setMessages(req.ProtoReflect(), "Zoë's fix\n\tline two")
		if err := invoke(withToken(f.tokens[auth.Admin]), t, f.conn, m, req); strings.Contains(status.Convert(err).Message(), "control character") {
			t.Errorf("%s refused a plain message: %v", m.Name(), err)
		}
	}
	for _, want := range []string{"Release", "Lock", "SetPolicy"} {
		if !strings.Contains(" "+strings.Join(withMessage, " ")+" ", " "+want+" ") {
			t.Errorf("no message field found in %s's request; found in %v", want, withMessage)
		}
	}
}

// Every method a viewer may not call names the commands that call it, so
// a refused user reads "fluxctl lock", the command they typed.
func TestRoleRefusalNamesTheCommand(t *testing.T) {
	for _, m := range fluxdv1.FluxService_ServiceDesc.Methods {
		full := "/" + fluxdv1.FluxService_ServiceDesc.ServiceName + "/" + m.MethodName
		if readOnly[full] || full == fluxdv1.FluxService_Release_FullMethodName {
			continue
		}
		if commandsOf[full] == "" {
			t.Errorf("%s needs the deployer role and names no command in commandsOf", m.MethodName)
		}
	}
	f := newFixture(t, &stubCluster{})
	_, err := f.client.SetPolicy(withToken(f.tokens[auth.Viewer]), &fluxdv1.SetPolicyRequest{Service: "default:deployment/x"})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "SetPolicy (fluxctl lock, unlock, automate, deautomate, policy) needs the deployer role") {
		t.Errorf("a viewer's lock: %v", err)
	}
}
