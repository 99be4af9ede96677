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

func newApproveCommand(g *globals) *cobra.Command {
	var pipeline, stage string
	cmd := &cobra.Command{
		Use:   "approve --stage STAGE [BUNDLE] [--pipeline P]",
		Short: "Approve a bundle into a stage that asks for approvals",
		Long: `approve approves a bundle into a stage whose Pipeline asks for approvals
(approvals: N). A bundle with all its approvals is promoted. The approval is
recorded as your token's holder (fluxd token create --name), never a name you
give: the same person approving twice counts once. A token made without a
name counts as its instance ("instance:NAME").

BUNDLE is a bundle's ID or a unique prefix of it; without one, the one bundle
awaiting approval in the stage is approved ('fluxctl stages' shows it). It
needs the deployer role, with every service of the stage in your token's
scope. CI can approve through fluxd's signed approval webhook instead
(docs/promotion.md).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if stage == "" {
				return errors.New("say which stage to approve the bundle into: --stage STAGE ('fluxctl stages' lists them)")
			}
			bundle := ""
			if len(args) == 1 {
				bundle = args[0]
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runApprove(ctx, cmd.OutOrStdout(), c, pipeline, stage, bundle)
			})
		},
	}
	cmd.Flags().StringVar(&stage, "stage", "", "the stage to approve the bundle into")
	cmd.Flags().StringVarP(&pipeline, "pipeline", "p", "", "the pipeline (default: the only one)")
	return cmd
}

func runApprove(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, pipeline, stage, bundle string) error {
	resp, err := c.Approve(ctx, &fluxdv1.ApproveRequest{Pipeline: pipeline, Stage: stage, Bundle: bundle})
	if err != nil {
		return err
	}
	r := resp.GetRecord()
	fmt.Fprintf(w, "Approved bundle %s into stage %s as %s: %d of %d approvals", r.GetBundle(), stage, resp.GetApprover(), len(r.GetApprovers()), resp.GetApprovals())
	if len(r.GetApprovers()) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(r.GetApprovers(), ", "))
	}
	fmt.Fprintln(w, ".")
	if int32(len(r.GetApprovers())) >= resp.GetApprovals() {
		fmt.Fprintf(w, "It has every approval the stage asks for: fluxd promotes it next ('fluxctl stages' follows it).\n")
	}
	return nil
}
