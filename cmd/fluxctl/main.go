// Command fluxctl is the command-line client of fluxd. It talks to fluxd
// over authenticated gRPC and imports nothing of the cluster, git or the
// database: those stay behind the API.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, g := newRootCommand()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", explain(err, g))
		os.Exit(1)
	}
}
