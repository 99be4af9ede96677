package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// lock and unlock set fluxd.io/locked on the workload in git.
func newLockCommand(g *globals) *cobra.Command {
	var message string
	cmd := &cobra.Command{
		Use:   "lock SERVICE",
		Short: "Stop all releases of a service, with a message saying why",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				if _, err := c.Lock(ctx, &fluxdv1.LockRequest{Service: args[0], Message: message, User: currentUser()}); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "Locked %s: no release will change it until it is unlocked.\n", args[0])
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&message, "message", "m", "", "why the service is locked")
	return cmd
}

func newUnlockCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "unlock SERVICE",
		Short: "Lift a service's lock",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				if _, err := c.Unlock(ctx, &fluxdv1.UnlockRequest{Service: args[0], User: currentUser()}); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "Unlocked %s.\n", args[0])
				return err
			})
		},
	}
}
