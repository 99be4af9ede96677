package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// releaseFlags are release's own flags.
type releaseFlags struct {
	spec           fluxdv1.ReleaseSpec
	dryRun         bool
	yes            bool
	noWait         bool
	rollback       bool
	rolloutTimeout time.Duration
}

func newReleaseCommand(g *globals) *cobra.Command {
	var rf releaseFlags
	cmd := &cobra.Command{
		Use:   "release (--service S ... | --all) [--exclude S ...] (--update-image IMG | --update-all-images)",
		Short: "Release new images to services, through git",
		Long: `release edits the manifests in git, pushes one commit, applies the changed
workloads and follows their rollout. The plan is computed from git, so git and
the cluster agree afterwards.

On a terminal it shows the plan and asks before releasing; what runs is what
you confirmed (the plan's checksum is checked). -y releases without asking;
--dry-run only shows the plan. The release runs as a job: fluxctl follows it
until the rollout is done (or --no-wait prints the job ID and returns), and
exits non-zero if it failed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(rf.spec.Services) == 0 && len(rf.spec.Files) == 0 && !rf.spec.All {
				return errors.New("say which services to release: --service NAME or --file PATH (repeatable), or --all")
			}
			if rf.spec.Image == "" && !rf.spec.AllLatest {
				return errors.New("say which image to release: --update-image REF or --update-all-images")
			}
			if rf.spec.User == "" {
				rf.spec.User = currentUser()
			}
			interactive := isTerminal()
			if !rf.dryRun && !rf.noWait && !cmd.Flags().Changed("timeout") && os.Getenv("FLUX_TIMEOUT") == "" {
				// Following the job lasts as long as its rollout, which
				// fluxd bounds with its own --rollout-timeout.
				g.timeout = 24 * time.Hour
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runRelease(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), c, &rf, interactive)
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&rf.spec.Services, "service", "s", nil, "service to release (repeatable)")
	f.BoolVar(&rf.spec.All, "all", false, "release all services")
	f.StringSliceVarP(&rf.spec.Files, "file", "f", nil, "release the services defined in this file of the repository (repeatable)")
	f.StringSliceVar(&rf.spec.Exclude, "exclude", nil, "service to leave out (repeatable)")
	f.StringVarP(&rf.spec.Image, "update-image", "i", "", "image to release: REPOSITORY:TAG, or a tag alone (1.2.0) for the named services' own repository")
	f.BoolVar(&rf.spec.AllLatest, "update-all-images", false, "release the newest image of every container")
	f.BoolVar(&rf.dryRun, "dry-run", false, "only show the plan; change nothing")
	f.BoolVarP(&rf.yes, "yes", "y", false, "release without asking for confirmation")
	f.BoolVar(&rf.noWait, "no-wait", false, "print the job ID and return without following the job")
	f.BoolVar(&rf.rollback, "rollback-on-failure", false, "if the rollout fails, revert the release (a new commit, re-applied and followed)")
	f.DurationVar(&rf.rolloutTimeout, "rollout-timeout", 0, "fail the release if its rollout takes longer (default: fluxd's --rollout-timeout)")
	f.BoolVar(&rf.spec.Force, "force", false, "release named services even if locked, and pin manifests whose images have no tag")
	f.BoolVar(&rf.spec.AllowUnverified, "allow-unverified", false, "release images that do not pass signature verification (fluxd --verify-config), which --force does not; admins only, recorded in the commit and history")
	f.StringVar(&rf.spec.User, "user", "", "who is releasing: a name, or git's form \"Jane Doe <jane@example.com>\" (default: git config user.name and user.email, else $USER)")
	f.StringVarP(&rf.spec.Message, "message", "m", "", "why")
	return cmd
}

func runRelease(ctx context.Context, in io.Reader, w io.Writer, c fluxdv1.FluxServiceClient, rf *releaseFlags, interactive bool) error {
	req := &fluxdv1.ReleaseRequest{Spec: &rf.spec, Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE,
		RollbackOnFailure: rf.rollback, RolloutTimeoutSeconds: int32(rf.rolloutTimeout / time.Second)}
	switch {
	case rf.dryRun:
		resp, err := c.Release(ctx, &fluxdv1.ReleaseRequest{Spec: &rf.spec, Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN})
		if err != nil {
			return err
		}
		printPlan(w, resp.GetPlan(), "This release would result in the following changes:")
		fmt.Fprintf(w, "\nDry run: nothing was changed (git revision %.12s, plan checksum %s).\n", resp.GetPlan().GetRevision(), resp.GetPlan().GetChecksum())
		return nil
	case !rf.yes && !interactive:
		// Plan anyway, so that a bad request is reported as such.
		if _, err := c.Release(ctx, &fluxdv1.ReleaseRequest{Spec: &rf.spec, Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN}); err != nil {
			return err
		}
		return errors.New(`fluxctl release needs a confirmation, and there is no terminal to ask on.

Try: --dry-run to see the plan, then run again with -y (--yes) to release without a prompt.`)
	case !rf.yes:
		resp, err := c.Release(ctx, &fluxdv1.ReleaseRequest{Spec: &rf.spec, Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN})
		if err != nil {
			return err
		}
		if printPlan(w, resp.GetPlan(), "This will result in the following changes:") == 0 {
			fmt.Fprintln(w, "\nNothing to release: no commit will be made.")
			return nil
		}
		fmt.Fprint(w, "\nDo you want to proceed? [Y/n] ")
		answer, _ := bufio.NewReader(in).ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "", "y", "yes":
		default:
			fmt.Fprintln(w, "Release cancelled; nothing was changed.")
			return nil
		}
		req.Checksum = resp.GetPlan().GetChecksum()
	}
	resp, err := c.Release(ctx, req)
	if err != nil {
		return err
	}
	if rf.yes {
		printPlan(w, resp.GetPlan(), "Releasing:")
	}
	if resp.GetJobId() == "" {
		fmt.Fprintln(w, "\nNothing to release: no commit was made.")
		return nil
	}
	if rf.noWait {
		fmt.Fprintf(w, "\nJob %s queued. Follow it with: fluxctl job %s --watch\n", resp.GetJobId(), resp.GetJobId())
		return nil
	}
	fmt.Fprintln(w)
	return followJob(ctx, w, c, resp.GetJobId(), interactive)
}

// printPlan writes a plan as a person reads it and returns its number of
// container updates.
func printPlan(w io.Writer, p *fluxdv1.Plan, header string) int {
	fmt.Fprintln(w, header)
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
				if v := u.GetVerification(); v != nil {
					fmt.Fprintf(w, "    Signature: %s\n", verificationLine(v))
				}
				n++
			}
		case "uptodate":
			if r, ok := strings.CutPrefix(it.GetReason(), "container "); ok {
				fmt.Fprintf(w, "  Container %s\n", r)
			} else {
				fmt.Fprintf(w, "  Up to date: %s\n", it.GetReason())
			}
		default:
			fmt.Fprintf(w, "  Skipped: %s\n", it.GetReason())
		}
		for _, warning := range it.GetWarnings() {
			fmt.Fprintf(w, "  Warning: %s\n", warning)
		}
	}
	return n
}

// verificationLine is an update's signature verification in a plan:
// verified by whom, or why not, at which digest.
func verificationLine(v *fluxdv1.Verification) string {
	switch v.GetOutcome() {
	case "not-required":
		return "not required (no verification profile applies)"
	case "verified":
		return v.GetDetail() + " at " + v.GetDigest()
	}
	line := strings.ToUpper(v.GetOutcome())
	if v.GetDetail() != "" {
		line += ": " + v.GetDetail()
	}
	if v.GetDigest() != "" && !strings.Contains(line, v.GetDigest()) {
		line += " (at " + v.GetDigest() + ")"
	}
	return line
}

// shortTarget drops the repository from target when it is current's.
func shortTarget(current, target string) string {
	ci, ti := strings.LastIndex(current, ":"), strings.LastIndex(target, ":")
	if ci > 0 && ti > 0 && current[:ci] == target[:ti] && !strings.Contains(current[ci:], "/") {
		return target[ti+1:]
	}
	return target
}

// isTerminal reports whether fluxctl talks to a person: prompts and
// progress bars then make sense.
func isTerminal() bool {
	return term.IsTerminal(int(os.Stdin.Fd())) && term.IsTerminal(int(os.Stdout.Fd()))
}
