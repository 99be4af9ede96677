package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newIdentityCommand(g *globals) *cobra.Command {
	var fingerprint bool
	cmd := &cobra.Command{
		Use:   "identity",
		Short: "Print the public SSH key fluxd reaches its git remote with",
		Long: "Print the public SSH key fluxd reaches an SSH git remote with, in authorized_keys form:\n" +
			"add it to the repository as a deploy key with write access.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runIdentity(ctx, cmd.OutOrStdout(), c, fingerprint)
			})
		},
	}
	cmd.Flags().BoolVarP(&fingerprint, "fingerprint", "l", false, "print the key's SHA256 fingerprint instead")
	return cmd
}

// runIdentity prints the key alone on a line, so that it can be piped
// where it is needed.
func runIdentity(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, fingerprint bool) error {
	resp, err := c.Identity(ctx, &fluxdv1.IdentityRequest{})
	if err != nil {
		return err
	}
	if fingerprint {
		_, err = fmt.Fprintln(w, resp.GetFingerprint())
		return err
	}
	_, err = fmt.Fprintln(w, resp.GetPublicKey())
	return err
}
