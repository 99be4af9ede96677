package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newReleaseCommand(g *globals) *cobra.Command {
	var (
		spec   fluxdv1.ReleaseSpec
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "release (--service S ... | --all) [--exclude S ...] (--update-image IMG | --update-all-images)",
		Short: "Release new images to services, through git",
		Long: `release edits the manifests in git, commits and pushes one commit, and
applies the changed workloads. With --dry-run it only shows the plan. The plan
is computed from git, so git and the cluster agree afterwards.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(spec.Services) == 0 && !spec.All {
				return errors.New("say which services to release: --service NAME (repeatable) or --all")
			}
			if spec.Image == "" && !spec.AllLatest {
				return errors.New("say which image to release: --update-image REF or --update-all-images")
			}
			if spec.User == "" {
				spec.User = currentUser()
			}
			kind := fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE
			if dryRun {
				kind = fluxdv1.ReleaseKind_RELEASE_KIND_PLAN
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runRelease(ctx, cmd.OutOrStdout(), c, &fluxdv1.ReleaseRequest{Spec: &spec, Kind: kind})
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&spec.Services, "service", "s", nil, "service to release (repeatable)")
	f.BoolVar(&spec.All, "all", false, "release all services")
	f.StringSliceVar(&spec.Exclude, "exclude", nil, "service to leave out (repeatable)")
	f.StringVarP(&spec.Image, "update-image", "i", "", "image reference to release")
	f.BoolVar(&spec.AllLatest, "update-all-images", false, "release the newest image of every container")
	f.BoolVar(&dryRun, "dry-run", false, "only show the plan; change nothing")
	f.StringVar(&spec.User, "user", "", "who is releasing (default: $USER)")
	f.StringVarP(&spec.Message, "message", "m", "", "why")
	return cmd
}

func runRelease(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, req *fluxdv1.ReleaseRequest) error {
	resp, err := c.Release(ctx, req)
	if err != nil {
		return err
	}
	dry := req.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_PLAN
	updates := printPlan(w, resp.GetPlan(), dry)
	switch {
	case dry:
		fmt.Fprintf(w, "\nDry run: nothing was changed (git revision %.12s).\n", resp.GetPlan().GetRevision())
	case resp.GetCommit() != "":
		fmt.Fprintf(w, "\nReleased: commit %.12s pushed and applied (%d container update(s)).\n", resp.GetCommit(), updates)
	default:
		fmt.Fprintln(w, "\nNothing to release: no commit was made.")
	}
	return nil
}

// printPlan writes a plan as a person reads it and returns its number of
// container updates.
func printPlan(w io.Writer, p *fluxdv1.Plan, dry bool) int {
	if dry {
		fmt.Fprintln(w, "This release would result in the following changes:")
	} else {
		fmt.Fprintln(w, "This release resulted in the following changes:")
	}
	n := 0
	if len(p.GetItems()) == 0 {
		fmt.Fprintln(w, "  (no services)")
	}
	for _, it := range p.GetItems() {
		fmt.Fprintf(w, "Service %s\n", it.GetService())
		switch it.GetAction() {
		case "update":
			for _, u := range it.GetUpdates() {
				fmt.Fprintf(w, "  Container %s: %s -> %s\n", u.GetContainer(), u.GetCurrent(), shortTarget(u.GetCurrent(), u.GetTarget()))
				n++
			}
		case "uptodate":
			fmt.Fprintf(w, "  Up to date: %s\n", it.GetReason())
		default:
			fmt.Fprintf(w, "  Skipped: %s\n", it.GetReason())
		}
	}
	return n
}

// shortTarget drops the repository from target when it is current's.
func shortTarget(current, target string) string {
	ci, ti := strings.LastIndex(current, ":"), strings.LastIndex(target, ":")
	if ci > 0 && ti > 0 && current[:ci] == target[:ti] && !strings.Contains(current[ci:], "/") {
		return target[ti+1:]
	}
	return target
}
