package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newSyncCommand(g *globals) *cobra.Command {
	var dryRun, noWait bool
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "Apply git to the cluster now (fluxd started with --sync-interval)",
		Long: "Fetch git and apply every object under fluxd's --git-path now, instead of at the next\n" +
			"commit or --sync-interval. With --dry-run, change nothing and print what would change,\n" +
			"object by object, with the fields that differ. It waits for the sync however long it\n" +
			"takes (fluxd bounds it with --sync-timeout; --timeout, when given, bounds the wait),\n" +
			"saying every 10 s that it is still syncing; --no-wait starts it and returns at once.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			if noWait && dryRun {
				return errors.New("--no-wait and --dry-run together: a dry run's answer is its report; drop --no-wait")
			}
			if noWait {
				return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
					return startSync(ctx, cmd.OutOrStdout(), c)
				})
			}
			// A sync takes as long as it takes (fluxd bounds it with
			// --sync-timeout): --timeout bounds it only when given.
			call := g.callUnbounded
			if cmd.Flags().Changed("timeout") {
				call = g.call
			}
			return call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				stop := progress(cmd.ErrOrStderr(), "syncing", 10*time.Second)
				defer stop()
				return runSync(ctx, cmd.OutOrStdout(), c, dryRun, g.output)
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "change nothing: print what a sync would change")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "start the sync and return at once; its outcome is in 'fluxctl history' and on the status page")
	addOutputFlag(cmd, g)
	return cmd
}

// startSync starts a sync without waiting for it.
func startSync(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient) error {
	resp, err := c.Sync(ctx, &fluxdv1.SyncRequest{NoWait: true})
	if err != nil {
		return err
	}
	if !resp.GetStarted() {
		return errors.New("fluxd did not say it started the sync (an older fluxd ignores --no-wait?); run 'fluxctl sync' without it")
	}
	fmt.Fprintln(w, "Sync started: fluxd fetches git and applies it now. 'fluxctl history' shows what it changed.")
	return nil
}

// progress writes "still <what> (Ns)" to w every interval until stopped,
// so that a long call is seen to be alive.
func progress(w io.Writer, what string, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	start := time.Now()
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(w, "still %s (%s)...\n", what, time.Since(start).Round(time.Second))
			}
		}
	}()
	return func() { close(done) }
}

type syncObjectJSON struct {
	Object string   `json:"object"`
	Source string   `json:"source,omitempty"`
	Action string   `json:"action"`
	Error  string   `json:"error,omitempty"`
	Diff   []string `json:"diff,omitempty"`
}

type syncJSON struct {
	Revision   string           `json:"revision"`
	DryRun     bool             `json:"dryRun"`
	Objects    []syncObjectJSON `json:"objects"`
	Problems   []string         `json:"problems,omitempty"`
	Error      string           `json:"error,omitempty"`
	DurationMs int64            `json:"durationMs"`
}

// runSync runs a sync and prints it: every object that changed (or
// would), with its fields on a dry run, then the failures. A sync that
// failed anywhere returns an error, so scripts see it in the exit code.
func runSync(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, dryRun bool, output string) error {
	resp, err := c.Sync(ctx, &fluxdv1.SyncRequest{DryRun: dryRun})
	if err != nil {
		return err
	}
	failed := resp.GetError() != "" || len(resp.GetProblems()) > 0
	for _, o := range resp.GetObjects() {
		failed = failed || o.GetAction() == "failed"
	}
	if output != "table" {
		out := syncJSON{Revision: resp.GetRevision(), DryRun: resp.GetDryRun(), Objects: []syncObjectJSON{}, Problems: resp.GetProblems(), Error: resp.GetError(), DurationMs: resp.GetDurationMs()}
		for _, o := range resp.GetObjects() {
			out.Objects = append(out.Objects, syncObjectJSON{o.GetObject(), o.GetSource(), o.GetAction(), o.GetError(), o.GetDiff()})
		}
		if err := writeData(w, output, out); err != nil {
			return err
		}
	} else {
		printSync(w, resp)
	}
	if failed {
		done := "applied"
		if dryRun {
			done = "checked"
		}
		return fmt.Errorf("the sync failed for some objects (listed above); the others were %s", done)
	}
	return nil
}

func printSync(w io.Writer, resp *fluxdv1.SyncResponse) {
	would := ""
	if resp.GetDryRun() {
		would = "would be "
		fmt.Fprintf(w, "Dry run of a sync of %.12s (nothing was changed):\n", resp.GetRevision())
	} else {
		fmt.Fprintf(w, "Synced %.12s in %s:\n", resp.GetRevision(), (time.Duration(resp.GetDurationMs()) * time.Millisecond).String())
	}
	counts := map[string]int{}
	for _, o := range resp.GetObjects() {
		counts[o.GetAction()]++
		switch o.GetAction() {
		case "unchanged":
			continue
		case "failed":
			fmt.Fprintf(w, "  %s failed (%s): %s\n", o.GetObject(), o.GetSource(), o.GetError())
			continue
		}
		src := ""
		if o.GetSource() != "" {
			src = " (" + o.GetSource() + ")"
		}
		fmt.Fprintf(w, "  %s %s%s%s\n", o.GetObject(), would, o.GetAction(), src)
		for _, d := range o.GetDiff() {
			fmt.Fprintf(w, "      %s\n", d)
		}
	}
	var parts []string
	for _, a := range []string{"created", "configured", "deleted", "unchanged", "skipped", "failed"} {
		if counts[a] == 0 {
			continue
		}
		if a == "unchanged" || a == "failed" {
			parts = append(parts, fmt.Sprintf("%d %s", counts[a], a))
		} else {
			parts = append(parts, fmt.Sprintf("%d %s%s", counts[a], would, a))
		}
	}
	if len(parts) == 0 {
		parts = []string{"no objects"}
	}
	fmt.Fprintf(w, "%s.\n", strings.Join(parts, ", "))
	for _, p := range resp.GetProblems() {
		fmt.Fprintf(w, "Not read: %s\n", p)
	}
	if e := resp.GetError(); e != "" {
		fmt.Fprintf(w, "Error: %s\n", e)
	}
}
