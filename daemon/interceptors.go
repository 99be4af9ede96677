package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// RequestIDHeader is the response header that carries a call's request ID,
// which the daemon's log lines for that call also carry.
const RequestIDHeader = "x-request-id"

type identityKey struct{}

// identity returns the caller's identity, set by the interceptors.
func identity(ctx context.Context) auth.Identity {
	id, _ := ctx.Value(identityKey{}).(auth.Identity)
	return id
}

// readOnly lists the methods a viewer may call. Every other method needs
// at least the deployer role, so that a method added later is guarded
// until someone decides it only reads. Release only reads when it plans.
var readOnly = map[string]bool{
	fluxdv1.FluxService_Version_FullMethodName:      true,
	fluxdv1.FluxService_Identity_FullMethodName:     true, // a public key
	fluxdv1.FluxService_ListServices_FullMethodName: true,
	fluxdv1.FluxService_ListImages_FullMethodName:   true,
	fluxdv1.FluxService_GetJob_FullMethodName:       true,
	fluxdv1.FluxService_WatchJob_FullMethodName:     true,
	fluxdv1.FluxService_ListJobs_FullMethodName:     true,
	fluxdv1.FluxService_GetJobLog_FullMethodName:    true,
	fluxdv1.FluxService_History_FullMethodName:      true,
	// A workload's pods, events and manifest read as list-services does;
	// GetPodLog is not here: logs may carry secrets (docs/security.md).
	fluxdv1.FluxService_GetResources_FullMethodName: true,
	fluxdv1.FluxService_GetManifest_FullMethodName:  true,
	// Pipelines, stages and bundles, as far as the caller's scope goes.
	fluxdv1.FluxService_ListPipelines_FullMethodName: true,
	fluxdv1.FluxService_ListStages_FullMethodName:    true,
	fluxdv1.FluxService_ListBundles_FullMethodName:   true,
	// Server reflection describes the API; it reads nothing of fluxd's.
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      true,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": true,
}

// healthPrefix is the gRPC health service's, the one service callable
// without a token: Kubernetes' gRPC probes cannot send one. It tells only
// whether fluxd is ready.
const healthPrefix = "/grpc.health.v1.Health/"

func requiredRole(method string, req any) auth.Role {
	if r, ok := req.(*fluxdv1.ReleaseRequest); ok {
		if r.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_PLAN {
			return auth.Viewer
		}
		return auth.Deployer
	}
	if r, ok := req.(*fluxdv1.PromoteRequest); ok {
		// As a release's: a viewer may see what a promotion would do.
		if r.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_PLAN {
			return auth.Viewer
		}
		return auth.Deployer
	}
	if readOnly[method] {
		return auth.Viewer
	}
	return auth.Deployer
}

func (s *Server) unaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	ctx, reqID, start := s.begin(ctx)
	defer func() { err = s.finish(info.FullMethod, reqID, start, recover(), err) }()
	if strings.HasPrefix(info.FullMethod, healthPrefix) {
		return handler(ctx, req)
	}
	if err := s.checkForwarded(ctx); err != nil {
		return nil, err
	}
	ctx, err = s.authorize(ctx, info.FullMethod, req)
	if err != nil {
		return nil, err
	}
	if err := checkUsers(req); err != nil {
		return nil, toStatus(err)
	}
	if !readOnly[info.FullMethod] { // a read's "user" is a filter (History)
		stampUsers(req, identity(ctx).Name)
	}
	ctx = withAnswerSlot(ctx, info.FullMethod)
	if conn, err := s.fwd.target(ctx, info.FullMethod); err != nil || conn != nil {
		if err != nil {
			return nil, toStatus(err)
		}
		resp, err := s.fwd.unary(ctx, conn, info.FullMethod, req)
		if err != nil && leaderFirst[info.FullMethod] && status.Code(err) == codes.Unavailable {
			resp, err = handler(ctx, req) // the leader is away: answer what this replica knows
		}
		if err != nil {
			return resp, err
		}
		return s.asJSON(ctx, resp)
	}
	resp, err = handler(ctx, req)
	if err != nil {
		return resp, err
	}
	return s.asJSON(ctx, resp)
}

func (s *Server) streamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	ctx, reqID, start := s.begin(ss.Context())
	defer func() { err = s.finish(info.FullMethod, reqID, start, recover(), err) }()
	if strings.HasPrefix(info.FullMethod, healthPrefix) {
		return handler(srv, ss)
	}
	if err := s.checkForwarded(ctx); err != nil {
		return err
	}
	ctx, err = s.authorize(ctx, info.FullMethod, nil)
	if err != nil {
		return err
	}
	if conn, err := s.fwd.target(ctx, info.FullMethod); err != nil || conn != nil {
		if err != nil {
			return toStatus(err)
		}
		return s.fwd.stream(&wrappedStream{ServerStream: ss, ctx: ctx, method: info.FullMethod}, conn, info.FullMethod)
	}
	return handler(srv, &wrappedStream{ServerStream: ss, ctx: ctx, method: info.FullMethod})
}

// begin gives the call a request ID and sends it back as a header.
func (s *Server) begin(ctx context.Context) (context.Context, string, time.Time) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	reqID := hex.EncodeToString(b[:])
	_ = grpc.SetHeader(ctx, metadata.Pairs(RequestIDHeader, reqID))
	return ctx, reqID, time.Now()
}

// finish turns a panic into an Internal error and logs the call.
func (s *Server) finish(method, reqID string, start time.Time, panicked any, err error) error {
	if panicked != nil {
		s.log.Error("panic in handler: this is a bug in fluxd", "method", method, "request_id", reqID, "panic", fmt.Sprint(panicked), "stack", string(debug.Stack()))
		return status.Errorf(codes.Internal, "fluxd hit an internal error (request ID %s).\n\nThis is a bug in fluxd, not in your request. Please report it with the request ID; the daemon's log has the details.", reqID)
	}
	code := status.Code(err)
	attrs := []any{"method", method, "request_id", reqID, "code", code.String(), "duration", time.Since(start)}
	switch code {
	case codes.OK:
		s.log.Debug("call", attrs...)
	case codes.Internal, codes.Unknown, codes.DataLoss:
		s.log.Error("call failed", append(attrs, "error", err)...)
	default:
		s.log.Info("call refused", append(attrs, "error", firstLine(err))...)
	}
	return err
}

// authorize authenticates the bearer token and checks the caller's role.
func (s *Server) authorize(ctx context.Context, method string, req any) (context.Context, error) {
	token, err := bearerToken(ctx)
	if err != nil {
		return nil, err
	}
	id, err := s.auth.Authenticate(token)
	if errors.Is(err, auth.ErrUnknownToken) {
		return nil, status.Error(codes.Unauthenticated, "the API token was not accepted.\n\n"+
			"Likely causes: the token was mistyped or truncated, it was made for another fluxd, or it was removed from the daemon's tokens file.\n"+
			"Try: check FLUX_TOKEN or --token; an admin can make a new one with 'fluxd token create --instance NAME --role viewer|deployer|admin'.")
	}
	if err != nil {
		s.log.Error("cannot read the tokens file", "error", err)
		return nil, status.Error(codes.Unavailable, "fluxd cannot check tokens just now: its tokens file cannot be read. An operator should look at the daemon's log.")
	}
	s.promote(ctx)
	if need := requiredRole(method, req); !id.Allows(need) {
		return nil, status.Errorf(codes.PermissionDenied, "%s needs the %s role, and this token (instance %q) has the %s role.\n\n"+
			"Try: use a token with the %s or admin role; an admin makes one with 'fluxd token create --instance %s --role %s'.",
			methodAndCommands(method), need, id.Instance, id.Role, need, id.Instance, need)
	}
	return context.WithValue(ctx, identityKey{}, id), nil
}

// promote marks the caller's connection as authenticated, so that a
// flood of connections that never authenticate does not close it
// (limitListener).
func (s *Server) promote(ctx context.Context) {
	if l := s.lis.Load(); l != nil {
		if p, ok := peer.FromContext(ctx); ok {
			l.promote(p.Addr)
		}
	}
}

func bearerToken(ctx context.Context) (string, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
		return "", status.Error(codes.Unauthenticated, "this call carries no API token, and every fluxd call needs one.\n\n"+
			"Try: set FLUX_TOKEN or pass --token to fluxctl; with grpcurl, add -H 'authorization: Bearer TOKEN'.")
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", status.Error(codes.Unauthenticated, "the authorization header is not of the form 'Bearer TOKEN'.")
	}
	return strings.TrimSpace(token), nil
}

func shortMethod(full string) string { return full[strings.LastIndex(full, "/")+1:] }

func firstLine(err error) string {
	msg := status.Convert(err).Message()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		return msg[:i]
	}
	return msg
}

type wrappedStream struct {
	grpc.ServerStream
	ctx    context.Context
	method string
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

// RecvMsg checks a streamed request's users as the unary interceptor
// checks a unary one's.
func (w *wrappedStream) RecvMsg(m any) error {
	if err := w.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := checkUsers(m); err != nil {
		return toStatus(err)
	}
	if !readOnly[w.method] {
		stampUsers(m, identity(w.ctx).Name)
	}
	return nil
}

// commandsOf names the fluxctl commands (and page actions) that call a
// method needing more than the viewer role: a refused user typed the
// command, not the method.
var commandsOf = map[string]string{
	fluxdv1.FluxService_Release_FullMethodName:     "fluxctl release, rollback",
	fluxdv1.FluxService_SetPolicy_FullMethodName:   "fluxctl lock, unlock, automate, deautomate, policy",
	fluxdv1.FluxService_Automate_FullMethodName:    "fluxctl automate",
	fluxdv1.FluxService_Deautomate_FullMethodName:  "fluxctl deautomate",
	fluxdv1.FluxService_Lock_FullMethodName:        "fluxctl lock",
	fluxdv1.FluxService_Unlock_FullMethodName:      "fluxctl unlock",
	fluxdv1.FluxService_NotifyImage_FullMethodName: "fluxctl notify",
	fluxdv1.FluxService_Sync_FullMethodName:        "fluxctl sync",
	fluxdv1.FluxService_CancelJob_FullMethodName:   "fluxctl cancel",
	fluxdv1.FluxService_GetPodLog_FullMethodName:   "the status page's pod logs",
	fluxdv1.FluxService_Promote_FullMethodName:     "fluxctl promote",
	fluxdv1.FluxService_Approve_FullMethodName:     "fluxctl approve",
	fluxdv1.FluxService_ResumeStage_FullMethodName: "fluxctl stages resume",
}

// methodAndCommands is a method's short name with what calls it, e.g.
// "SetPolicy (fluxctl lock, unlock, ...)".
func methodAndCommands(method string) string {
	if c, ok := commandsOf[method]; ok {
		return shortMethod(method) + " (" + c + ")"
	}
	return shortMethod(method)
}
