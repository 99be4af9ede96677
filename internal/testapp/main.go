// Command testapp is the program in the images the real node's tests run.
// APP_MODE, set in the image's configuration, picks how it behaves, so
// that a rollout can fail the ways pods really fail:
//
//	serve     (default) HTTP on $PORT (8080): /healthz and /readyz 200
//	crash     print a line and exit at once with status 3
//	notready  serve, but /readyz is always 503
package main

import (
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	mode := os.Getenv("APP_MODE")
	version := os.Getenv("APP_VERSION")
	fmt.Printf("testapp %s: mode %q\n", version, mode)
	if mode == "crash" {
		fmt.Println("testapp: crashing on purpose (exit 3)")
		os.Exit(3)
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if mode == "notready" {
			http.Error(w, "never ready, on purpose", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintf(w, "testapp %s\n", version) })
	srv := &http.Server{Addr: ":" + port, Handler: mux}
	go func() {
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
		<-sigs
		fmt.Println("testapp: SIGTERM, stopping")
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "testapp:", err)
		os.Exit(1)
	}
}
