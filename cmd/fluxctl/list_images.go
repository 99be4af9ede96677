package main

import (
	"context"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// list-images reaches the ListImages RPC, which the daemon does not build
// yet: it answers with an explicit "not implemented" error.
func newListImagesCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list-images SERVICE",
		Short: "List the images available to each container of a service (not implemented yet)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				_, err := c.ListImages(ctx, &fluxdv1.ListImagesRequest{Service: args[0]})
				return err
			})
		},
	}
	addOutputFlag(cmd, g)
	return cmd
}
