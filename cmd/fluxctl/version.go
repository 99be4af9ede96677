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
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the client and server versions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runVersion(ctx, cmd.OutOrStdout(), c, g.output)
			})
		},
	}
	addOutputFlag(cmd, g)
	return cmd
}

type versionJSON struct {
	Client   string `json:"client"`
	Server   string `json:"server"`
	Instance string `json:"instance"`
	Role     string `json:"role"`
}

func runVersion(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, output string) error {
	resp, err := c.Version(ctx, &fluxdv1.VersionRequest{})
	if err != nil {
		return err
	}
	v := versionJSON{Client: version.String(), Server: resp.GetVersion(), Instance: resp.GetInstance(),
		Role: strings.ToLower(strings.TrimPrefix(resp.GetRole().String(), "ROLE_"))}
	if output != "table" {
		return writeData(w, output, v)
	}
	_, err = fmt.Fprintf(w, "client: %s\nserver: %s\ninstance: %s\nrole: %s\n", v.Client, v.Server, v.Instance, v.Role)
	return err
}
