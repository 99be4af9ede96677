package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
	"golang.org/x/net/http2"
)

// stubCluster is the daemon's own Cluster interface, satisfied in memory.
type stubCluster struct {
	workloads []platform.Workload
	panics    bool
}

func (c *stubCluster) Workloads(context.Context) ([]platform.Workload, error) {
	if c.panics {
		var m map[string]int
		m["boom"]++ // a nil-map write: a real runtime panic
	}
	return c.workloads, nil
}

// stubReleaser has an empty repository.
type stubReleaser struct{}

func (stubReleaser) Plan(context.Context, release.Spec) (*release.Plan, error) {
	return &release.Plan{}, nil
}

func (stubReleaser) Execute(context.Context, string, release.Spec, history.Type, release.ExecOptions) (*release.Result, error) {
	return nil, errors.New("stubReleaser does not execute")
}

func (stubReleaser) SetPolicy(context.Context, string, release.PolicyChange) (string, error) {
	return "", errors.New("stubReleaser does not commit")
}

func (stubReleaser) WhatChanged(string, *release.Plan) string { return "" }

func (stubReleaser) Manifests(context.Context) (string, *gitrepo.Manifests, error) {
	return "rev", &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}, nil
}

// stubJobs knows no jobs.
type stubJobs struct{}

func (stubJobs) Enqueue(context.Context, string, release.Spec, string) (jobs.JobUpdate, error) {
	return jobs.JobUpdate{}, errors.New("stubJobs does not run jobs")
}

func (stubJobs) Get(_ context.Context, _, id string) (jobs.JobUpdate, error) {
	return jobs.JobUpdate{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("there is no job %q", id), "")
}

func (j stubJobs) List(context.Context, string, int) ([]jobs.JobUpdate, error) { return nil, nil }

func (j stubJobs) Cancel(ctx context.Context, instance, id string) (jobs.JobUpdate, error) {
	return j.Get(ctx, instance, id)
}

func (j stubJobs) Watch(ctx context.Context, instance, id string) (<-chan jobs.JobUpdate, error) {
	_, err := j.Get(ctx, instance, id)
	return nil, err
}

type fixture struct {
	client fluxdv1.FluxServiceClient
	conn   *grpc.ClientConn
	// tokens are instance team-a's, other instance team-b's.
	tokens, other map[auth.Role]string
	// tokensFile is the tokens file the server reads.
	tokensFile string
	daemon     *Daemon
}

func newFixture(t *testing.T, cluster Cluster) *fixture {
	return newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: stubReleaser{}, Jobs: stubJobs{}})
}

// newFixtureWith serves a Daemon of deps over bufconn, with tokens of
// every role for two instances. cfg's Listen, TokensFile and Version are
// set here.
func newFixtureWith(t testing.TB, cfg Config, deps Deps) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	f := &fixture{tokens: map[auth.Role]string{}, other: map[auth.Role]string{}, tokensFile: path}
	for _, r := range []auth.Role{auth.Viewer, auth.Deployer, auth.Admin} {
		for instance, m := range map[string]map[auth.Role]string{"team-a": f.tokens, "team-b": f.other} {
			tok, err := auth.Create(path, auth.Identity{Instance: instance, Role: r})
			if err != nil {
				t.Fatal(err)
			}
			m[r] = tok
		}
	}
	store, err := auth.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Listen, cfg.TokensFile, cfg.Version = "bufconn:0", path, "v-test"
	d := New(cfg, deps, log)
	f.daemon = d
	srv := NewServer(d, store, log)
	lis := bufconn.Listen(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, lis, time.Second) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	f.conn = conn
	f.client = fluxdv1.NewFluxServiceClient(conn)
	return f
}

func withToken(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

func TestVersionReportsIdentity(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	resp, err := f.client.Version(withToken(f.tokens[auth.Deployer]), &fluxdv1.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetVersion() != "v-test" || resp.GetInstance() != "team-a" || resp.GetRole() != fluxdv1.Role_ROLE_DEPLOYER {
		t.Errorf("Version = %v", resp)
	}
}

func TestAuthentication(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		code codes.Code
		msg  string
	}{
		{"no token", context.Background(), codes.Unauthenticated, "carries no API token"},
		{"wrong token", withToken("fxd_wrong"), codes.Unauthenticated, "was not accepted"},
		{"not bearer", metadata.AppendToOutgoingContext(context.Background(), "authorization", "Basic abc"), codes.Unauthenticated, "Bearer TOKEN"},
		{"viewer", withToken(f.tokens[auth.Viewer]), codes.OK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client.ListServices(tc.ctx, &fluxdv1.ListServicesRequest{})
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("ListServices: %v; want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
}

func TestStreamsNeedATokenToo(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	stream, err := f.client.WatchJob(context.Background(), &fluxdv1.WatchJobRequest{Id: "1"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("WatchJob without token: %v, want Unauthenticated", err)
	}
	stream, err = f.client.WatchJob(withToken(f.tokens[auth.Viewer]), &fluxdv1.WatchJobRequest{Id: "1"})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("WatchJob with token: %v, want NotFound", err)
	}
}

// Kubernetes' gRPC probes send no token: health answers without one, and
// only health; reflection still needs a token.
func TestHealthNeedsNoTokenButReflectionDoes(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	h := healthpb.NewHealthClient(f.conn)
	for _, svc := range []string{"", fluxdv1.FluxService_ServiceDesc.ServiceName} {
		resp, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q without a token: %v, %v", svc, resp, err)
		}
	}
	if _, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("health of an unknown service: %v", err)
	}
	refl := reflectionpb.NewServerReflectionClient(f.conn)
	stream, err := refl.ServerReflectionInfo(context.Background())
	if err == nil {
		_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = stream.Recv() // a refused stream's status comes here
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("reflection without a token: %v", err)
	}
	stream, err = refl.ServerReflectionInfo(withToken(f.tokens[auth.Viewer]))
	if err == nil {
		_ = stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}})
		_, err = stream.Recv() // a refused stream's status comes here
	}
	if err != nil {
		t.Fatalf("reflection with a token: %v", err)
	}
}

func TestRoles(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	plan := &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN}
	execute := &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE}
	for _, tc := range []struct {
		name string
		role auth.Role
		call func(context.Context) error
		want codes.Code
	}{
		{"viewer automate", auth.Viewer, func(ctx context.Context) error {
			_, err := f.client.Automate(ctx, &fluxdv1.AutomateRequest{Service: "x"})
			return err
		}, codes.PermissionDenied},
		{"viewer lock", auth.Viewer, func(ctx context.Context) error {
			_, err := f.client.Lock(ctx, &fluxdv1.LockRequest{Service: "x"})
			return err
		}, codes.PermissionDenied},
		{"viewer release execute", auth.Viewer, func(ctx context.Context) error {
			_, err := f.client.Release(ctx, execute)
			return err
		}, codes.PermissionDenied},
		// Past authorization: a plan with no services is a bad request.
		{"viewer release plan", auth.Viewer, func(ctx context.Context) error {
			_, err := f.client.Release(ctx, plan)
			return err
		}, codes.InvalidArgument},
		{"deployer automate unknown", auth.Deployer, func(ctx context.Context) error {
			_, err := f.client.Automate(ctx, &fluxdv1.AutomateRequest{Service: "x"})
			return err
		}, codes.NotFound},
		{"deployer set policy with nothing to set", auth.Deployer, func(ctx context.Context) error {
			_, err := f.client.SetPolicy(ctx, &fluxdv1.SetPolicyRequest{Service: "x"})
			return err
		}, codes.InvalidArgument},
		{"deployer set a bad filter", auth.Deployer, func(ctx context.Context) error {
			bad := "semver:>>1"
			_, err := f.client.SetPolicy(ctx, &fluxdv1.SetPolicyRequest{Service: "x", TagAll: &bad})
			return err
		}, codes.InvalidArgument},
		{"viewer set policy", auth.Viewer, func(ctx context.Context) error {
			_, err := f.client.SetPolicy(ctx, &fluxdv1.SetPolicyRequest{Service: "x"})
			return err
		}, codes.PermissionDenied},
		{"deployer notify bad image", auth.Deployer, func(ctx context.Context) error {
			_, err := f.client.NotifyImage(ctx, &fluxdv1.NotifyImageRequest{Image: "Bad Image!"})
			return err
		}, codes.InvalidArgument},
		{"deployer cancel unknown job", auth.Deployer, func(ctx context.Context) error {
			_, err := f.client.CancelJob(ctx, &fluxdv1.CancelJobRequest{Id: "1"})
			return err
		}, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(withToken(f.tokens[tc.role]))
			if status.Code(err) != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want == codes.PermissionDenied && !strings.Contains(err.Error(), "needs the deployer role") {
				t.Errorf("PermissionDenied message is not helpful: %v", err)
			}
			if tc.want == codes.Unimplemented && !strings.Contains(err.Error(), "not implemented") {
				t.Errorf("Unimplemented message does not say so: %v", err)
			}
		})
	}
}

func TestPanicBecomesInternalWithRequestID(t *testing.T) {
	f := newFixture(t, &stubCluster{panics: true})
	var header metadata.MD
	_, err := f.client.ListServices(withToken(f.tokens[auth.Viewer]), &fluxdv1.ListServicesRequest{}, grpc.Header(&header))
	if status.Code(err) != codes.Internal {
		t.Fatalf("got %v, want Internal", err)
	}
	ids := header.Get(RequestIDHeader)
	if len(ids) != 1 || !strings.Contains(err.Error(), ids[0]) {
		t.Fatalf("error %q does not carry the request ID header %v", err, ids)
	}
	// The server keeps serving after a panic.
	if _, err := f.client.Version(withToken(f.tokens[auth.Viewer]), &fluxdv1.VersionRequest{}); err != nil {
		t.Fatalf("Version after panic: %v", err)
	}
}

func TestListServicesFiltersNamespace(t *testing.T) {
	ws := []platform.Workload{
		{ID: platform.ID{Namespace: "a", Kind: "deployment", Name: "x"}},
		{ID: platform.ID{Namespace: "b", Kind: "deployment", Name: "y"}},
	}
	f := newFixture(t, &stubCluster{workloads: ws})
	resp, err := f.client.ListServices(withToken(f.tokens[auth.Viewer]), &fluxdv1.ListServicesRequest{Namespace: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetServices()) != 1 || resp.GetServices()[0].GetId() != "b:deployment/y" {
		t.Fatalf("ListServices(namespace b) = %v", resp.GetServices())
	}
}

func TestConfigValidateReportsEverything(t *testing.T) {
	err := Config{Listen: "nonsense", ShutdownGrace: -1}.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad config")
	}
	for _, want := range []string{"--listen", "--tokens-file", "--shutdown-grace"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error does not mention %s:\n%v", want, err)
		}
	}
}

func TestHumaneErrorsCarryHelpInDetails(t *testing.T) {
	f := newFixture(t, &stubCluster{})
	_, err := f.client.Automate(withToken(f.tokens[auth.Deployer]), &fluxdv1.AutomateRequest{Service: "nope"})
	st := status.Convert(err)
	if st.Code() != codes.NotFound || strings.Contains(st.Message(), "list-services") {
		t.Fatalf("status %v: want NotFound with the help kept out of the message", st)
	}
	var help, reason string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			help, reason = info.GetMetadata()["help"], info.GetReason()
		}
	}
	if reason != "MISSING" || !strings.Contains(help, "'fluxctl list-services' lists the services") {
		t.Errorf("ErrorInfo reason %q, help %q", reason, help)
	}
}

// A client that pings faster than the keepalive policy allows is sent
// away (GOAWAY, ENHANCE_YOUR_CALM): pings cost the server work before any
// token is shown.
func TestServerSendsAwayClientsThatPingTooOften(t *testing.T) {
	addr, _, stop := serveStub(t, time.Second)
	defer func() { <-stop() }()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	goaway := make(chan http2.ErrCode, 1)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				close(goaway)
				return
			}
			if g, ok := f.(*http2.GoAwayFrame); ok {
				goaway <- g.ErrCode
				return
			}
		}
	}()
	for i := range 10 {
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			break // sent away already
		}
	}
	code, ok := <-goaway
	if !ok || code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("10 pings at once: GOAWAY %v (received: %v), want ENHANCE_YOUR_CALM", code, ok)
	}
}
