package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newNotifyCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "notify IMAGE",
		Short: "Tell fluxd an image was pushed: it refreshes the repository now and wakes the automator",
		Long: `notify refreshes IMAGE's repository at once, as a registry's push webhook
would. IMAGE may be a bare repository (host/ns/app) or carry a tag.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				resp, err := c.NotifyImage(ctx, &fluxdv1.NotifyImageRequest{Image: args[0]})
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "Refreshed %s: %d tags. Automated services that use it are checked now.\n", resp.GetRepository(), resp.GetTags())
				return err
			})
		},
	}
}
