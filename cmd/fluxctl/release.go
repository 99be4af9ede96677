package main

import (
	"context"
	"errors"
	"os"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// release reaches the Release RPC, which the daemon does not build yet: it
// answers with an explicit "not implemented" error.
func newReleaseCommand(g *globals) *cobra.Command {
	var (
		spec   fluxdv1.ReleaseSpec
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Release new images to services (not implemented yet)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(spec.Services) == 0 && !spec.All {
				return errors.New("say which services to release: --service NAME (repeatable) or --all")
			}
			if spec.Image == "" && !spec.AllLatest {
				return errors.New("say which image to release: --update-image REF or --update-all-images")
			}
			if spec.User == "" {
				spec.User = os.Getenv("USER")
			}
			kind := fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE
			if dryRun {
				kind = fluxdv1.ReleaseKind_RELEASE_KIND_PLAN
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				_, err := c.Release(ctx, &fluxdv1.ReleaseRequest{Spec: &spec, Kind: kind})
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&spec.Services, "service", "s", nil, "service to release (repeatable)")
	f.BoolVar(&spec.All, "all", false, "release all services")
	f.StringSliceVar(&spec.Exclude, "exclude", nil, "service to leave out (repeatable)")
	f.StringVarP(&spec.Image, "update-image", "i", "", "image reference to release")
	f.BoolVar(&spec.AllLatest, "update-all-images", false, "release the newest image of every container")
	f.BoolVar(&dryRun, "dry-run", false, "only show the plan")
	f.StringVar(&spec.User, "user", "", "who is releasing (default: $USER)")
	f.StringVarP(&spec.Message, "message", "m", "", "why")
	return cmd
}
