package main

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"github.com/fluxd/fluxd/internal/auth"
)

func newTokenCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Manage API tokens",
	}
	cmd.AddCommand(newTokenCreateCommand())
	return cmd
}

func newTokenCreateCommand() *cobra.Command {
	var file, instance, role string
	var scope auth.Scope
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create an API token, print it once and store only its hash",
		Long: `Create makes a new random API token for an instance and role, appends its
SHA-256 hash to the tokens file and prints the token. The token is shown only
this once: fluxd keeps just its hash. A running fluxd picks it up at once.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(scope.Namespaces) > 0 {
				if err := auth.AddScope(file, instance, &scope); err != nil {
					return err
				}
			} else if len(scope.Paths) > 0 {
				return fmt.Errorf("--git-paths narrows --namespaces: give the instance's namespaces too")
			}
			return createToken(cmd.OutOrStdout(), file, instance, role)
		},
	}
	cmd.Flags().StringVar(&file, "tokens-file", "", "file of hashed API tokens, created if missing (required)")
	cmd.Flags().StringVar(&instance, "instance", "", "instance ID the token speaks for (required)")
	cmd.Flags().StringVar(&role, "role", "viewer", "role: viewer, deployer or admin")
	cmd.Flags().StringSliceVar(&scope.Namespaces, "namespaces", nil, "give the instance a scope: the only namespaces whose services its tokens see and act on (written as a 'scope' line; an instance without one may act on every service)")
	cmd.Flags().StringSliceVar(&scope.Paths, "git-paths", nil, "with --namespaces: narrow the scope to services git defines under these repository paths")
	_ = cmd.MarkFlagRequired("tokens-file")
	_ = cmd.MarkFlagRequired("instance")
	return cmd
}

func createToken(w io.Writer, file, instance, roleName string) error {
	role, err := auth.ParseRole(roleName)
	if err != nil {
		return err
	}
	token, err := auth.Create(file, auth.Identity{Instance: instance, Role: role})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, token)
	return err
}

// warnUnscoped warns, once at start, of each instance of the tokens file
// that has no scope: its deployers may release, lock and automate every
// service fluxd sees, as before scopes existed. A scoped one is logged at
// info, with its scope.
func warnUnscoped(instances map[string]*auth.Scope, log *slog.Logger) {
	for _, inst := range slices.Sorted(maps.Keys(instances)) {
		if sc := instances[inst]; sc != nil {
			log.Info("instance scope", "component", "auth", "instance", inst, "scope", sc.String())
			continue
		}
		log.Warn("instance has no scope: its deployers may release, lock and automate every service fluxd sees; give it one with a line 'scope "+inst+" namespaces=NS[,NS...] [paths=PATH,...]' in the tokens file", "component", "auth", "instance", inst)
	}
}
