package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/clientkey"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/internal/grpcwindow"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// Authenticator resolves a bearer token to an identity.
type Authenticator interface {
	Authenticate(token string) (auth.Identity, error)
}

// Server is the gRPC edge of a Daemon.
type Server struct {
	fluxdv1.UnimplementedFluxServiceServer // only for forward compatibility: every method is defined below

	d    *Daemon
	auth Authenticator
	log  *slog.Logger
	grpc *grpc.Server
	fwd  *forwarder // nil: this replica serves everything itself
	// maxConns bounds the connections Serve accepts, maxConnsPerAddr
	// those of one client address; connections from proxies are counted
	// against maxConns only.
	maxConns, maxConnsPerAddr int
	proxies                   clientkey.Proxies
	// lis is Serve's listener, whose connections a valid token promotes.
	lis atomic.Pointer[limitListener]
	// replicaCAs sign the certificates of replicas whose forwarded
	// calls are taken (RequireReplicaCerts).
	replicaCAs *x509.CertPool
}

// FollowLeader makes the server forward leader-only calls (releases, jobs,
// policy changes, notifications) to the leader while this replica follows.
// self names this replica in the forwarded calls. peer is the TLS set-up
// that verifies the leader (and presents this replica's certificate): a
// forwarded call carries the caller's token, so it is only ever sent to a
// peer whose certificate the replica CA signed. With peer nil, calls are
// not forwarded: the caller is told to call the leader. Call before Serve.
func (s *Server) FollowLeader(self string, l Leadership, peer *tls.Config) {
	s.fwd = &forwarder{self: self, leadership: l, peer: peer, conns: map[string]*grpc.ClientConn{}}
}

var _ fluxdv1.FluxServiceServer = (*Server)(nil)

// ServerOption configures a Server.
type ServerOption func(*serverOptions)

type serverOptions struct {
	metrics                   prometheus.Registerer
	maxConns, maxConnsPerAddr int
	proxies                   clientkey.Proxies
}

// Limits on what any client, before it shows a token, can hold of the
// server: the health service needs none, and every connection costs
// memory before its first call is authenticated.
const (
	// DefaultMaxConnections bounds the API's open connections; more
	// wait in the listener's backlog until one closes.
	DefaultMaxConnections = 1024
	// keptShare is the share of the connection limit (1/keptShare) kept
	// for connections that showed a valid token: unauthenticated ones
	// hold at most the rest, and beyond the oldest is closed for a new
	// one (limitListener).
	keptShare = 4
	// DefaultMaxConnectionsPerAddress bounds the connections of one
	// client address (IPv4 address, IPv6 /64), well below
	// DefaultMaxConnections: one client, with no token, cannot hold
	// them all. More are closed at once.
	DefaultMaxConnectionsPerAddress = 64
	// maxConcurrentStreams bounds the calls in flight on one connection.
	maxConcurrentStreams = 256
	// keepaliveMinTime is the least interval between a client's
	// keepalive pings, which are allowed only while it has calls; a
	// client pinging faster, or without calls, is sent away.
	keepaliveMinTime = time.Minute
	// maxConnectionIdle closes connections without calls for this long.
	maxConnectionIdle = 15 * time.Minute
	// handshakeTimeout bounds a new connection's set-up (TLS included).
	handshakeTimeout = 10 * time.Second
)

// WithMaxConnections bounds the open connections Serve accepts (default
// DefaultMaxConnections).
func WithMaxConnections(n int) ServerOption {
	return func(o *serverOptions) { o.maxConns = n }
}

// WithMaxConnectionsPerAddress bounds the open connections of one client
// address (default DefaultMaxConnectionsPerAddress, and never more than
// the connection limit); more are closed as soon as they are accepted.
func WithMaxConnectionsPerAddress(n int) ServerOption {
	return func(o *serverOptions) { o.maxConnsPerAddr = n }
}

// WithTrustedProxies names the proxies (--trusted-proxies) whose
// connections carry many clients: they count against the connection
// limit only, not against one client's share.
func WithTrustedProxies(p clientkey.Proxies) ServerOption {
	return func(o *serverOptions) { o.proxies = p }
}

// WithMetrics counts every call by method and gRPC code, and times it
// (grpc_server_handled_total, grpc_server_handling_seconds and the rest of
// go-grpc-middleware's Prometheus provider), refused calls included: the
// metrics see a call before it is authenticated.
func WithMetrics(reg prometheus.Registerer) ServerOption {
	return func(o *serverOptions) { o.metrics = reg }
}

// NewServer returns a Server for d that authenticates with a. It also
// serves server reflection, which needs a token like every call, and the
// gRPC health service, which needs none (Kubernetes' gRPC probes send
// none) and reports Daemon.Ready.
func NewServer(d *Daemon, a Authenticator, log *slog.Logger, opts ...ServerOption) *Server {
	var o serverOptions
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{d: d, auth: a, log: log.With("component", "grpc")}
	unary := []grpc.UnaryServerInterceptor{s.unaryInterceptor}
	stream := []grpc.StreamServerInterceptor{s.streamInterceptor}
	var metrics *grpcprom.ServerMetrics
	if o.metrics != nil {
		metrics = grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
			grpcprom.WithHistogramBuckets([]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30})))
		o.metrics.MustRegister(metrics)
		unary = append([]grpc.UnaryServerInterceptor{metrics.UnaryServerInterceptor()}, unary...)
		stream = append([]grpc.StreamServerInterceptor{metrics.StreamServerInterceptor()}, stream...)
	}
	if o.maxConns <= 0 {
		o.maxConns = DefaultMaxConnections
	}
	if o.maxConnsPerAddr <= 0 {
		o.maxConnsPerAddr = DefaultMaxConnectionsPerAddress
	}
	s.maxConns, s.maxConnsPerAddr, s.proxies = o.maxConns, min(o.maxConnsPerAddr, o.maxConns), o.proxies
	s.grpc = grpc.NewServer(grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...),
		grpc.ForceServerCodecV2(newViewCodec(d)),
		grpc.Creds(tlsInfo{}),
		grpc.MaxConcurrentStreams(maxConcurrentStreams),
		// A list-services answer at 10,000 workloads is about 2 MB: with
		// gRPC's 32 KiB write buffer that was 64 writes to the socket per
		// answer. The buffer is shared (taken from a pool while a
		// connection writes), so idle connections hold none.
		grpc.WriteBufferSize(writeBufferSize), grpc.SharedWriteBuffer(true),
		// gRPC's default windows and read buffer on purpose: the
		// server receives small requests, and how fast an answer
		// flows is set by its client's windows (fluxd's own clients
		// take internal/grpcwindow's). That package says why, and
		// what a larger read buffer would pin per connection here.
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: keepaliveMinTime, PermitWithoutStream: false}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: maxConnectionIdle, Time: 2 * time.Minute, Timeout: 20 * time.Second}))
	fluxdv1.RegisterFluxServiceServer(s.grpc, s)
	healthpb.RegisterHealthServer(s.grpc, &healthServer{s: s, every: 5 * time.Second})
	reflection.Register(s.grpc)
	if metrics != nil {
		// Every method and code is exported from the start, at zero.
		metrics.InitializeMetrics(s.grpc)
	}
	return s
}

// writeBufferSize is how much a connection writes to its socket at once.
const writeBufferSize = 256 << 10

// InProcess returns a client connection to this server over an
// in-memory listener: its calls pass the same interceptors (token, role,
// forwarding to the leader) as calls from the network. The web page's
// JSON API calls through it. It is served until Serve stops.
func (s *Server) InProcess() (*grpc.ClientConn, error) {
	lis := bufconn.Listen(1 << 20)
	go func() {
		if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.log.Error("serving in-process calls stopped", "error", err)
		}
	}()
	return grpc.NewClient("passthrough:///in-process", append(grpcwindow.DialOptions(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxAnswerBytes)))...)
}

// MaxAnswerBytes is the largest answer fluxd's own clients (the web
// page's in-process calls, a follower's calls to the leader; fluxctl has
// the same) take, in place of gRPC's default of 4 MiB: the JSON API's
// list-services answer passed 4 MiB at about 9,000 workloads, and the
// page got "received message larger than max" instead of its services.
const MaxAnswerBytes = 128 << 20

// Serve serves on lis until ctx is cancelled, then stops gracefully,
// giving in-flight calls up to grace to finish.
func (s *Server) Serve(ctx context.Context, lis net.Listener, grace time.Duration) error {
	g, ctx := errgroup.WithContext(ctx)
	ll := newLimitListener(lis, s.maxConns, s.maxConns/keptShare, s.maxConnsPerAddr, s.proxies)
	s.lis.Store(ll)
	lis = ll
	g.Go(func() error {
		s.log.Info("serving the fluxd API", "address", lis.Addr().String())
		if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serving gRPC on %s: %w", lis.Addr(), err)
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
			s.log.Warn("calls still running after the shutdown grace period; stopping them", "grace", grace)
			s.grpc.Stop()
		}
		return nil
	})
	defer s.fwd.close()
	return g.Wait()
}

// Version reports the daemon's version and the caller's identity.
func (s *Server) Version(ctx context.Context, _ *fluxdv1.VersionRequest) (*fluxdv1.VersionResponse, error) {
	id := identity(ctx)
	return &fluxdv1.VersionResponse{Version: s.d.cfg.Version, Instance: id.Instance, Role: roleToProto(id.Role)}, nil
}

// Identity reports the public SSH key fluxd reaches its git remote with.
func (s *Server) Identity(ctx context.Context, _ *fluxdv1.IdentityRequest) (*fluxdv1.IdentityResponse, error) {
	key, ok := s.d.DeployKey()
	if !ok {
		return nil, toStatus(fluxerr.New(fluxerr.Precondition, errors.New("fluxd reaches its git remote without an SSH key"),
			"Its --git-url is not an SSH URL (ssh://… or git@host:path), so there is no deploy key to add: file:// needs none, and https:// carries its credentials in the URL."))
	}
	return &fluxdv1.IdentityResponse{PublicKey: key.PublicKey, Fingerprint: key.Fingerprint, GitUrl: key.Remote}, nil
}

// ListServices lists the workloads in the cluster and in git.
func (s *Server) ListServices(ctx context.Context, req *fluxdv1.ListServicesRequest) (*fluxdv1.ListServicesResponse, error) {
	svcs, err := s.d.serviceProtos(ctx, req.GetNamespace())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &fluxdv1.ListServicesResponse{Services: svcs}
	if st, ok := s.d.gitStatus(); ok {
		resp.Git = gitStatusToProto(st)
	}
	return resp, nil
}

// ListImages lists each container's available images.
func (s *Server) ListImages(ctx context.Context, req *fluxdv1.ListImagesRequest) (*fluxdv1.ListImagesResponse, error) {
	page := Page{Offset: max(int(req.GetOffset()), 0), Limit: max(int(req.GetLimit()), 0)}
	svc, cis, err := s.d.ListImagesPage(ctx, identity(ctx), req.GetService(), page)
	if err != nil {
		return nil, toStatus(err)
	}
	return &fluxdv1.ListImagesResponse{Services: []*fluxdv1.ServiceImages{serviceImagesToProto(svc, cis, max(int(req.GetOffset()), 0), int(req.GetLimit()))}}, nil
}

// Release plans a release, or queues its execution and returns the job.
func (s *Server) Release(ctx context.Context, req *fluxdv1.ReleaseRequest) (*fluxdv1.ReleaseResponse, error) {
	if req.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_UNSPECIFIED {
		return nil, status.Error(codes.InvalidArgument, "release kind is unspecified: ask for a plan or an execution")
	}
	res, err := s.d.Release(ctx, identity(ctx), releaseRequestFromProto(req))
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &fluxdv1.ReleaseResponse{Plan: planToProto(res.Plan)}
	if res.Job != nil {
		resp.JobId = res.Job.Job.ID
	}
	return resp, nil
}

// History lists the caller's instance's events.
func (s *Server) History(ctx context.Context, req *fluxdv1.HistoryRequest) (*fluxdv1.HistoryResponse, error) {
	var since, until time.Time
	if req.GetSince() != nil {
		since = req.GetSince().AsTime()
	}
	if req.GetUntil() != nil {
		until = req.GetUntil().AsTime()
	}
	evs, err := s.d.History(ctx, identity(ctx), req.GetService(), int(req.GetLimit()), HistoryType(req.GetType()), HistoryUser(req.GetUser()), HistoryBetween(since, until))
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &fluxdv1.HistoryResponse{}
	for _, ev := range evs {
		resp.Events = append(resp.Events, eventToProto(ev))
	}
	return resp, nil
}

// Automate turns on automated releases for a service, in git.
func (s *Server) Automate(ctx context.Context, req *fluxdv1.AutomateRequest) (*fluxdv1.AutomateResponse, error) {
	_, err := s.d.SetPolicy(ctx, identity(ctx), req.GetService(), PolicyUpdate{Automated: ptr(true), User: req.GetUser()})
	return &fluxdv1.AutomateResponse{}, toStatus(err)
}

// Deautomate turns off automated releases for a service, in git.
func (s *Server) Deautomate(ctx context.Context, req *fluxdv1.DeautomateRequest) (*fluxdv1.DeautomateResponse, error) {
	_, err := s.d.SetPolicy(ctx, identity(ctx), req.GetService(), PolicyUpdate{Automated: ptr(false), User: req.GetUser()})
	return &fluxdv1.DeautomateResponse{}, toStatus(err)
}

// Lock stops releases of a service, in git.
func (s *Server) Lock(ctx context.Context, req *fluxdv1.LockRequest) (*fluxdv1.LockResponse, error) {
	_, err := s.d.SetPolicy(ctx, identity(ctx), req.GetService(), PolicyUpdate{Locked: ptr(true), LockMessage: req.GetMessage(), User: req.GetUser()})
	return &fluxdv1.LockResponse{}, toStatus(err)
}

// Unlock lifts a service's lock, in git.
func (s *Server) Unlock(ctx context.Context, req *fluxdv1.UnlockRequest) (*fluxdv1.UnlockResponse, error) {
	_, err := s.d.SetPolicy(ctx, identity(ctx), req.GetService(), PolicyUpdate{Locked: ptr(false), User: req.GetUser()})
	return &fluxdv1.UnlockResponse{}, toStatus(err)
}

// GetJob reports one job.
func (s *Server) GetJob(ctx context.Context, req *fluxdv1.GetJobRequest) (*fluxdv1.GetJobResponse, error) {
	u, err := s.d.deps.Jobs.Get(ctx, identity(ctx).Instance, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &fluxdv1.GetJobResponse{Job: jobToProto(u)}, nil
}

// ListJobs lists recent jobs, newest first.
func (s *Server) ListJobs(ctx context.Context, req *fluxdv1.ListJobsRequest) (*fluxdv1.ListJobsResponse, error) {
	us, err := s.d.deps.Jobs.List(ctx, identity(ctx).Instance, int(req.GetLimit()))
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &fluxdv1.ListJobsResponse{}
	for _, u := range us {
		resp.Jobs = append(resp.Jobs, jobToProto(u))
	}
	return resp, nil
}

// GetJobLog returns a job's log lines after a sequence number.
func (s *Server) GetJobLog(ctx context.Context, req *fluxdv1.GetJobLogRequest) (*fluxdv1.GetJobLogResponse, error) {
	logs, ok := s.d.deps.Jobs.(interface {
		JobLog(ctx context.Context, instance, id string, after int64) ([]history.JobLogLine, error)
	})
	if !ok {
		return nil, status.Error(codes.Unimplemented, "job logs are not implemented by this fluxd's job queue")
	}
	lines, err := logs.JobLog(ctx, identity(ctx).Instance, req.GetId(), req.GetAfter())
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &fluxdv1.GetJobLogResponse{}
	for _, l := range lines {
		resp.Lines = append(resp.Lines, JobLogLine(l))
	}
	return resp, nil
}

// CancelJob cancels a queued job, or a running one that has not pushed.
func (s *Server) CancelJob(ctx context.Context, req *fluxdv1.CancelJobRequest) (*fluxdv1.CancelJobResponse, error) {
	u, err := s.d.deps.Jobs.Cancel(ctx, identity(ctx).Instance, req.GetId())
	if err != nil {
		return nil, toStatus(err)
	}
	return &fluxdv1.CancelJobResponse{Job: jobToProto(u)}, nil
}

// WatchJob streams a job's state until it ends.
func (s *Server) WatchJob(req *fluxdv1.WatchJobRequest, stream grpc.ServerStreamingServer[fluxdv1.WatchJobResponse]) error {
	ctx := stream.Context()
	ch, err := s.d.deps.Jobs.Watch(ctx, identity(ctx).Instance, req.GetId())
	if err != nil {
		return toStatus(err)
	}
	for u := range ch {
		if err := stream.Send(WatchJobResponse(u)); err != nil {
			return err
		}
	}
	// A caller that went away is Canceled, not an Unknown error logged
	// as fluxd's own failure.
	return status.FromContextError(ctx.Err()).Err()
}

// NotifyImage refreshes a repository at once and wakes the automator.
func (s *Server) NotifyImage(ctx context.Context, req *fluxdv1.NotifyImageRequest) (*fluxdv1.NotifyImageResponse, error) {
	repo, n, err := s.d.Notify(ctx, identity(ctx), req.GetImage())
	if err != nil {
		return nil, toStatus(err)
	}
	return &fluxdv1.NotifyImageResponse{Repository: repo, Tags: int32(n)}, nil
}

// SetPolicy changes a service's policies (automation, lock, tag filters)
// in one commit.
func (s *Server) SetPolicy(ctx context.Context, req *fluxdv1.SetPolicyRequest) (*fluxdv1.SetPolicyResponse, error) {
	commit, err := s.d.SetPolicy(ctx, identity(ctx), req.GetService(), PolicyUpdate{
		Automated: req.Automated, Locked: req.Locked, LockMessage: req.GetLockMessage(),
		TagAll: req.TagAll, TagOrder: req.TagOrder, TagPrerelease: req.TagPrerelease, Tags: req.GetTagFilters(), User: req.GetUser(),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &fluxdv1.SetPolicyResponse{Commit: commit}, nil
}

func ptr[T any](v T) *T { return &v }
