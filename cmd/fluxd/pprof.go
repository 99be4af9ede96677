package main

import (
	"errors"
	"net/http"
	"net/http/pprof"
)

// servePprof adds Go's profiles to mux at /debug/pprof/ (--pprof): what
// `go tool pprof http://ADDR/debug/pprof/profile?seconds=30` and
// `.../allocs` read. They are unauthenticated, as the metrics are, so
// /debug/pprof/cmdline is not served: fluxd's command line may carry a
// --git-url with credentials in it (pprof.Index answers it 404).
func servePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// validatePprof checks that --pprof has a listener to be served on.
func validatePprof(f flags) error {
	if f.pprof && f.metricsListen == "" {
		return errors.New("--pprof serves the profiles on the metrics listener, and --metrics-listen is not set: add --metrics-listen=127.0.0.1:9797 (a private address), or drop --pprof")
	}
	return nil
}
