package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fluxd/fluxd/internal/version"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the client and server versions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runVersion(ctx, cmd.OutOrStdout(), c)
			})
		},
	}
}

func runVersion(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient) error {
	resp, err := c.Version(ctx, &fluxdv1.VersionRequest{})
	if err != nil {
		return err
	}
	role := strings.ToLower(strings.TrimPrefix(resp.GetRole().String(), "ROLE_"))
	_, err = fmt.Fprintf(w, "client: %s\nserver: %s\ninstance: %s\nrole: %s\n", version.String(), resp.GetVersion(), resp.GetInstance(), role)
	return err
}
