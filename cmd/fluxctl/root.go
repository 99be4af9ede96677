package main

import (
	"encoding/json"
	"io"
	"slices"

	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"sigs.k8s.io/yaml"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// globals are the flags every command shares. Each has an environment
// variable, so a shell can set them once.
type globals struct {
	url     string
	token   string
	timeout time.Duration
	output  string
	// caFile, certFile and keyFile configure TLS (https:// addresses):
	// the CAs to trust instead of the system's, and a client certificate.
	caFile, certFile, keyFile string
}

func newRootCommand() (*cobra.Command, *globals) {
	g := &globals{}
	root := &cobra.Command{
		Use:           "fluxctl",
		Short:         "fluxctl talks to fluxd: list services and images, release, automate, lock, see history",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.url, "url", "", "fluxd API address, e.g. localhost:3030 or grpc://host:3030 (env FLUX_URL)")
	pf.StringVar(&g.token, "token", "", "API token (env FLUX_TOKEN)")
	pf.DurationVar(&g.timeout, "timeout", 30*time.Second, "how long to wait for fluxd to answer (env FLUX_TIMEOUT)")
	pf.StringVar(&g.caFile, "ca-file", "", "with an https:// address: PEM file of the CAs that sign fluxd's certificate, instead of the system's (env FLUX_CA_FILE)")
	pf.StringVar(&g.certFile, "cert-file", "", "with an https:// address: client certificate to present, when fluxd asks for one (env FLUX_CERT_FILE)")
	pf.StringVar(&g.keyFile, "key-file", "", "the client certificate's key (env FLUX_KEY_FILE)")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		return applyEnv(cmd.Flags(), map[string]string{"url": "FLUX_URL", "token": "FLUX_TOKEN", "timeout": "FLUX_TIMEOUT",
			"ca-file": "FLUX_CA_FILE", "cert-file": "FLUX_CERT_FILE", "key-file": "FLUX_KEY_FILE"})
	}
	root.AddCommand(
		newVersionCommand(g),
		newIdentityCommand(g),
		newListServicesCommand(g),
		newSyncCommand(g),
		newListImagesCommand(g),
		newReleaseCommand(g),
		newRollbackCommand(g),
		newPolicyCommand(g),
		newAutomateCommand(g),
		newDeautomateCommand(g),
		newLockCommand(g),
		newUnlockCommand(g),
		newHistoryCommand(g),
		newJobsCommand(g),
		newJobCommand(g),
		newCancelCommand(g),
		newNotifyCommand(g),
		newCheckCommand(g),
		newStagesCommand(g),
		newBundlesCommand(g),
		newPromoteCommand(g),
		newApproveCommand(g),
		newInstallCommand(),
	)
	wireCompletions(root, g)
	return root, g
}

// applyEnv fills each flag not given on the command line from its
// environment variable.
func applyEnv(fs *pflag.FlagSet, env map[string]string) error {
	for name, key := range env {
		f := fs.Lookup(name)
		v, ok := os.LookupEnv(key)
		if f == nil || f.Changed || !ok || v == "" {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s=%q: %w", key, v, err)
		}
	}
	return nil
}

// call runs fn with a connected client and the command's timeout.
func (g *globals) call(ctx context.Context, fn func(context.Context, fluxdv1.FluxServiceClient) error) error {
	conn, err := dial(g.url, g.token, g.caFile, g.certFile, g.keyFile)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return fn(ctx, fluxdv1.NewFluxServiceClient(conn))
}

// callUnbounded is call without the --timeout: for a call that lasts as
// long as the work it waits for, which fluxd bounds itself.
func (g *globals) callUnbounded(ctx context.Context, fn func(context.Context, fluxdv1.FluxServiceClient) error) error {
	conn, err := dial(g.url, g.token, g.caFile, g.certFile, g.keyFile)
	if err != nil {
		return err
	}
	defer conn.Close()
	return fn(ctx, fluxdv1.NewFluxServiceClient(conn))
}

// addOutputFlag adds -o to a listing command.
func addOutputFlag(cmd *cobra.Command, g *globals) {
	cmd.Flags().StringVarP(&g.output, "output", "o", "table", "output format: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", fixed(outputs))
}

// outputs are the values of -o.
var outputs = []string{"table", "json", "yaml"}

func checkOutput(o string) error {
	if !slices.Contains(outputs, o) {
		return errors.New("-o " + o + ": use table, json or yaml")
	}
	return nil
}

// writeData prints v, a command's JSON form, as -o asked: indented JSON,
// or the same document as YAML (keys sorted).
func writeData(w io.Writer, output string, v any) error {
	if output == "yaml" {
		j, err := json.Marshal(v)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(j)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// currentUser names who runs fluxctl, for commits and history, as Flux
// v1's fluxctl did: git's "Name <email>" from git config user.name and
// user.email where git has them, else $USER, else the account name.
func currentUser() string {
	if name := gitConfig("user.name"); name != "" {
		if email := gitConfig("user.email"); email != "" {
			return name + " <" + email + ">"
		}
		return name
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// gitConfig is one value of git's configuration, or "" when git is not
// installed or the key is not set.
func gitConfig(key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "config", "--get", key).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
