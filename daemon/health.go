package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// Ready reports why fluxd cannot serve its API just now, or nil: git is
// not cloned yet, a git operation is stuck past its timeout, the remote
// has failed every operation for GitOutageNotReady, or the readiness check
// given in Deps (the cluster caches, the database) fails.
//
// Once cloned, a failed fetch alone does not make fluxd unready: every
// replica shares the remote, so a short outage would take them all out
// of their Services (and block node drains, the PodDisruptionBudget
// counting them unhealthy) while they could still serve from their last
// copy.
func (d *Daemon) Ready(ctx context.Context) error {
	if d.deps.Git != nil {
		st := d.deps.Git.Status()
		switch {
		case st.StalledPastTimeout(time.Now(), stallGrace):
			return NotReady("git", fmt.Errorf("%s has waited on the remote for %v, longer than its timeout of %v: the connection is stuck and every git operation waits behind it",
				st.Waiting, time.Since(st.WaitingSince).Round(time.Second), st.WaitingFor))
		case st.NotCloned && st.Error != "":
			return NotReady("git", fmt.Errorf("not cloned yet, retrying: %s", st.Error))
		case st.NotCloned:
			return NotReady("git", errors.New("cloning"))
		case st.Error != "" && time.Since(st.ErrorSince) > GitOutageNotReady:
			return NotReady("git", fmt.Errorf("failing for %v: %s", time.Since(st.ErrorSince).Round(time.Second), st.Error))
		}
	}
	if d.deps.Ready != nil {
		return d.deps.Ready(ctx)
	}
	return nil
}

// GitOutageNotReady is how long the git remote may fail every operation,
// once cloned, before readiness fails.
const GitOutageNotReady = 5 * time.Minute

// stallGrace is how long past its own timeout a git operation may still
// be running before readiness fails: the timeout ends it, closing its
// connection, so one still running after this is stuck.
const stallGrace = 10 * time.Second

// healthServer is grpc.health.v1.Health over Daemon.Ready, for
// Kubernetes' gRPC readiness probes, which send no token: it is the one
// service callable without one, and it says only SERVING or NOT_SERVING,
// never why (the log says why).
type healthServer struct {
	healthpb.UnimplementedHealthServer
	s *Server
	// every is how often Watch checks again.
	every time.Duration

	mu       sync.Mutex
	notReady error // the last check's, to log changes only

	watch healthWatch // the Watch streams' one ticker

	// watching counts the open Watch streams, at most maxHealthWatches.
	watching atomic.Int64
}

// maxHealthWatches bounds the open health Watch streams, from all clients
// together: a stream keeps its connection from ever going idle, and
// needs no token. Kubernetes' probes call Check; a watcher beyond the
// bound is refused (ResourceExhausted) and may poll Check instead.
const maxHealthWatches = 64

// healthChecked are the services Check answers for: the server as a
// whole ("") and the fluxd API.
var healthChecked = map[string]bool{"": true, fluxdv1.FluxService_ServiceDesc.ServiceName: true}

func (h *healthServer) status(ctx context.Context) healthpb.HealthCheckResponse_ServingStatus {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := h.s.d.readyShared(ctx)
	// Log changes only: probes come every few seconds.
	h.mu.Lock()
	if was := h.notReady; err != nil && (was == nil || err.Error() != was.Error()) {
		h.s.log.Warn("health: not ready", "error", err)
	} else if err == nil && was != nil {
		h.s.log.Info("health: ready again")
	}
	h.notReady = err
	h.mu.Unlock()
	if err != nil {
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	return healthpb.HealthCheckResponse_SERVING
}

func (h *healthServer) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if !healthChecked[req.GetService()] {
		return nil, status.Errorf(codes.NotFound, "no health is reported for the service %q", req.GetService())
	}
	return &healthpb.HealthCheckResponse{Status: h.status(ctx)}, nil
}

func (h *healthServer) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	st := h.status(ctx)
	out := &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{}}
	for name := range healthChecked {
		out.Statuses[name] = &healthpb.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// Watch sends the status now, then every change, checking every h.every.
func (h *healthServer) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	ctx := stream.Context()
	if !healthChecked[req.GetService()] {
		return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVICE_UNKNOWN})
	}
	if h.watching.Add(1) > maxHealthWatches {
		h.watching.Add(-1)
		return status.Errorf(codes.ResourceExhausted, "%d health Watch streams are open already, fluxd's limit: close one, or call Check (every few seconds) instead", maxHealthWatches)
	}
	defer h.watching.Add(-1)
	// The streams share one ticker (subscribe): many streams cost no
	// more checks than one.
	defer h.subscribe()()
	last := healthpb.HealthCheckResponse_UNKNOWN
	st, changed := h.status(ctx), (chan struct{})(nil)
	for {
		if st != last && st != healthpb.HealthCheckResponse_UNKNOWN {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		var shared healthpb.HealthCheckResponse_ServingStatus
		shared, changed = h.current()
		if shared != healthpb.HealthCheckResponse_UNKNOWN && shared != last {
			st = shared
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			st, _ = h.current()
		}
	}
}

// HealthHandler serves /healthz and /readyz over plain HTTP, without a
// token and without the API, for the kubelet's probes where the API
// listener needs TLS or a client certificate the kubelet has not got.
// /healthz answers 200 while the process serves; /readyz answers 200
// when Ready passes, else 503 naming the failing components only ("not
// ready: git"). See HealthHandlerWith for the reasons.
func (d *Daemon) HealthHandler() http.Handler { return d.HealthHandlerWith(nil) }

// HealthHandlerWith is HealthHandler whose /readyz also says why, to a
// caller whose bearer token a accepts (any role): a redacted git URL or
// a public key may be in the reason, which is for fluxd's users, not for
// anyone who can reach the port. Readiness is shared for a second, like
// the gRPC health service's.
func (d *Daemon) HealthHandlerWith(a Authenticator) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		err := d.readyShared(ctx)
		if err == nil {
			_, _ = io.WriteString(w, "ok\n")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		if a != nil && authenticated(r, a) {
			_, _ = io.WriteString(w, "not ready: "+err.Error()+"\n")
			return
		}
		_, _ = io.WriteString(w, "not ready: "+strings.Join(notReadyComponents(err), ", ")+"\n")
	})
	return mux
}

// authenticated says whether r carries a bearer token a accepts.
func authenticated(r *http.Request, a Authenticator) bool {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(tok) == "" {
		return false
	}
	_, err := a.Authenticate(strings.TrimSpace(tok))
	return err == nil
}

// ComponentError is a component's reason for fluxd not being ready.
type ComponentError struct {
	Component string
	Err       error
}

func (e *ComponentError) Error() string { return e.Component + ": " + e.Err.Error() }
func (e *ComponentError) Unwrap() error { return e.Err }

// NotReady names the component err is about (git, cluster, database);
// nil stays nil. A caller without a token learns only the name.
func NotReady(component string, err error) error {
	if err == nil {
		return nil
	}
	return &ComponentError{Component: component, Err: err}
}

// notReadyComponents lists the components err names, in order; an error
// of none is "fluxd".
func notReadyComponents(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if ce, ok := err.(*ComponentError); ok {
			out = append(out, ce.Component)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		default:
			out = append(out, "fluxd")
		}
	}
	walk(err)
	return slices.Compact(out)
}
