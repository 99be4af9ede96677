package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
)

// startupHealth serves the health listener from fluxd's first moment:
// /healthz 200, and /readyz 503 with the step fluxd is on (reaching the
// API server, syncing the caches, reading the deploy key) until the
// daemon's own handler takes over. A pod that hangs at start then says
// why to a person who curls it, and the kubelet's liveness probe does not
// kill a fluxd that is only slow to start.
type startupHealth struct {
	step    atomic.Pointer[string]
	handler atomic.Pointer[http.Handler]
}

// starting records the step fluxd is on.
func (h *startupHealth) starting(step string) { h.step.Store(&step) }

// serve hands the listener to h, the daemon's handler.
func (h *startupHealth) serve(next http.Handler) { h.handler.Store(&next) }

func (h *startupHealth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if next := h.handler.Load(); next != nil {
		(*next).ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	switch r.URL.Path {
	case "/healthz":
		_, _ = io.WriteString(w, "ok\n")
	case "/readyz":
		step := "starting"
		if s := h.step.Load(); s != nil {
			step = *s
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "not ready: starting: "+step+"\n")
	default:
		http.NotFound(w, r)
	}
}

// startHealth serves health probes on addr (none when it is empty) from
// now until ctx ends, and returns the startup health and a function that
// waits for the listener to stop.
func startHealth(ctx context.Context, addr string, log *slog.Logger) (*startupHealth, func(), error) {
	health := &startupHealth{}
	if addr == "" {
		return health, func() {}, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listening for health probes on %s: %w", addr, err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := serveHTTP(ctx, lis, health, "health", log); err != nil {
			log.Error("the health listener stopped", "error", err)
		}
	}()
	return health, func() { <-served }, nil
}
