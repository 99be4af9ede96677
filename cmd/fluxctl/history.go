package main

import (
	"context"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// history reaches the History RPC, which the daemon does not build yet: it
// answers with an explicit "not implemented" error.
func newHistoryCommand(g *globals) *cobra.Command {
	var service string
	var limit int32
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Show recorded events, newest first (not implemented yet)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				_, err := c.History(ctx, &fluxdv1.HistoryRequest{Service: service, Limit: limit})
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&service, "service", "s", "", "only this service")
	cmd.Flags().Int32Var(&limit, "limit", 50, "at most this many events")
	addOutputFlag(cmd, g)
	return cmd
}
