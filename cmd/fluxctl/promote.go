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

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// promoteFlags are promote's own flags.
type promoteFlags struct {
	req    fluxdv1.PromoteRequest
	dryRun bool
	yes    bool
	noWait bool
}

func newPromoteCommand(g *globals) *cobra.Command {
	var pf promoteFlags
	cmd := &cobra.Command{
		Use:   "promote --to STAGE [BUNDLE] [--pipeline P]",
		Short: "Promote a bundle into a stage by hand, through git like any release",
		Long: `promote writes a bundle's images (tag, and digest where the services pin
digests) into the manifests of a stage's services: one commit, through the
same checked path as a release, authored by you. Without BUNDLE it promotes
the newest bundle verified in the stage's from-stage; BUNDLE (an ID or a
unique prefix, 'fluxctl bundles' lists them) promotes another, an older one
too. Promoting anything but the newest verified bundle pauses automatic
promotion into the stage, so that it is not overwritten; 'fluxctl stages
resume STAGE' ends the pause.

On a terminal it shows the plan and asks before promoting; what runs is what
you confirmed (the plan's checksum is checked). -y promotes without asking;
--dry-run only shows the plan. --force promotes a bundle not verified in the
from-stage. It needs the deployer role, with every service of the stage in
your token's scope.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pf.req.Stage == "" {
				return errors.New("say which stage to promote into: --to STAGE ('fluxctl stages' lists them)")
			}
			if len(args) == 1 {
				pf.req.Bundle = args[0]
			}
			if pf.req.User == "" {
				pf.req.User = currentUser()
			}
			interactive := isTerminal()
			if !pf.dryRun && !pf.noWait && !cmd.Flags().Changed("timeout") && os.Getenv("FLUX_TIMEOUT") == "" {
				// Following the job lasts as long as its rollout.
				g.timeout = 24 * time.Hour
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runPromote(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), c, &pf, interactive)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&pf.req.Stage, "to", "", "the stage to promote into")
	f.StringVarP(&pf.req.Pipeline, "pipeline", "p", "", "the pipeline (default: the only one)")
	f.BoolVar(&pf.dryRun, "dry-run", false, "only show the plan; change nothing")
	f.BoolVarP(&pf.yes, "yes", "y", false, "promote without asking for confirmation")
	f.BoolVar(&pf.noWait, "no-wait", false, "print the job ID and return without following the job")
	f.BoolVar(&pf.req.Force, "force", false, "promote a bundle that is not verified in the stage's from-stage")
	f.StringVar(&pf.req.User, "user", "", "who is promoting: a name, or git's form \"Jane Doe <jane@example.com>\" (default: git config user.name and user.email, else $USER)")
	return cmd
}

func runPromote(ctx context.Context, in io.Reader, w io.Writer, c fluxdv1.FluxServiceClient, pf *promoteFlags, interactive bool) error {
	plan := func() (*fluxdv1.PromoteResponse, error) {
		return c.Promote(ctx, &fluxdv1.PromoteRequest{Pipeline: pf.req.GetPipeline(), Stage: pf.req.GetStage(), Bundle: pf.req.GetBundle(),
			Force: pf.req.GetForce(), User: pf.req.GetUser(), Kind: fluxdv1.ReleaseKind_RELEASE_KIND_PLAN})
	}
	exec := &fluxdv1.PromoteRequest{Pipeline: pf.req.GetPipeline(), Stage: pf.req.GetStage(), Bundle: pf.req.GetBundle(), Force: pf.req.GetForce(), User: pf.req.GetUser(),
		Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE}
	switch {
	case pf.dryRun:
		resp, err := plan()
		if err != nil {
			return err
		}
		printPlan(w, resp.GetPlan(), promotionHeader(resp, "would make"))
		fmt.Fprintf(w, "\nDry run: nothing was changed (git revision %.12s, plan checksum %s).\n", resp.GetPlan().GetRevision(), resp.GetPlan().GetChecksum())
		return nil
	case !pf.yes && !interactive:
		if _, err := plan(); err != nil {
			return err
		}
		return errors.New(`fluxctl promote needs a confirmation, and there is no terminal to ask on.

Try: --dry-run to see the plan, then run again with -y (--yes) to promote without a prompt.`)
	case !pf.yes:
		resp, err := plan()
		if err != nil {
			return err
		}
		if printPlan(w, resp.GetPlan(), promotionHeader(resp, "will make")) == 0 {
			fmt.Fprintln(w, "\nNothing to promote: the stage runs the bundle already; no commit will be made.")
			return nil
		}
		fmt.Fprint(w, "\nDo you want to proceed? [Y/n] ")
		answer, _ := bufio.NewReader(in).ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(answer)) {
		case "", "y", "yes":
		default:
			fmt.Fprintln(w, "Promotion cancelled; nothing was changed.")
			return nil
		}
		// Promote exactly the bundle shown, with the plan shown.
		exec.Bundle, exec.Checksum = resp.GetBundle(), resp.GetPlan().GetChecksum()
	}
	resp, err := c.Promote(ctx, exec)
	if err != nil {
		return err
	}
	if pf.yes {
		printPlan(w, resp.GetPlan(), promotionHeader(resp, "makes"))
	}
	if resp.GetJobId() == "" {
		fmt.Fprintln(w, "\nNothing to promote: the stage runs the bundle already; no commit was made.")
		return nil
	}
	if pf.noWait {
		fmt.Fprintf(w, "\nJob %s queued. Follow it with: fluxctl job %s --watch\n", resp.GetJobId(), resp.GetJobId())
		return nil
	}
	fmt.Fprintln(w)
	return followJob(ctx, w, c, resp.GetJobId(), interactive)
}

// promotionHeader introduces a promotion's plan.
func promotionHeader(resp *fluxdv1.PromoteResponse, verb string) string {
	return fmt.Sprintf("Promoting bundle %s into stage %s of pipeline %s %s these changes:", resp.GetBundle(), resp.GetStage(), resp.GetPipeline(), verb)
}
