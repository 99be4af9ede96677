package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// automate and deautomate set fluxd.io/automated on the workload in git.
func newAutomateCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "automate SERVICE",
		Short: "Turn on automated releases for a service (an annotation committed to git)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				if _, err := c.Automate(ctx, &fluxdv1.AutomateRequest{Service: args[0], User: currentUser()}); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "Automated %s: fluxd will release its newest images by itself.\n", args[0])
				return err
			})
		},
	}
}

func newDeautomateCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "deautomate SERVICE",
		Short: "Turn off automated releases for a service",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				if _, err := c.Deautomate(ctx, &fluxdv1.DeautomateRequest{Service: args[0], User: currentUser()}); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "Deautomated %s.\n", args[0])
				return err
			})
		},
	}
}
