package main

import (
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/fluxd/fluxd/deploy"
)

// newInstallCommand prints fluxd's install manifests, customised; it
// needs no fluxd (it is how one gets one).
func newInstallCommand() *cobra.Command {
	var o deploy.Options
	cmd := &cobra.Command{
		Use:   "install --git-url URL [--namespace NS] [--watch-namespace NS ...] [--git-branch B] [--git-path P ...] [--image REF]",
		Short: "Print the manifests that install fluxd in a cluster (pipe them to kubectl apply -f -)",
		Long: `Print fluxd's install manifests (deploy/ of the repository: Namespace under
restricted Pod Security, ServiceAccount and least-privilege RBAC, a Deployment
of one replica by default (--replicas 2 or more runs them with leader election
on a shared PostgreSQL), Services, a PodDisruptionBudget and a NetworkPolicy), customised, and a Secret fluxd-git holding --git-url.

The output holds --git-url as given: if it carries a token, treat it as a
secret. Create the Secret fluxd-tokens too (see docs/install.md). With an SSH --git-url, fluxd keeps its deploy key in the Secret
fluxd-ssh, which the output ships empty: fluxd generates the key into it, and
'fluxctl identity' prints the public key to add, with write access, while fluxd
waits for it. Create the ConfigMap fluxd-known-hosts (key "known_hosts") too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInstall(cmd.OutOrStdout(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Namespace, "namespace", "fluxd", "fluxd's own namespace")
	f.StringSliceVar(&o.Watch, "watch-namespace", []string{"default"}, "namespaces whose workloads fluxd releases (repeatable)")
	f.StringVar(&o.GitURL, "git-url", "", "the manifests' git remote (required)")
	f.StringVar(&o.GitBranch, "git-branch", "", "the branch (default: fluxd's, main)")
	f.StringSliceVar(&o.GitPaths, "git-path", nil, "sub-paths with manifests (repeatable)")
	f.StringVar(&o.Image, "image", "", "fluxd's image, REGISTRY/REPOSITORY:TAG (required: no image is published; 'make image IMAGE=...' builds and pushes one)")
	f.IntVar(&o.Replicas, "replicas", 1, "fluxd's replicas: 1 keeps history in SQLite in the pod (Recreate strategy); more run with --leader-elect and need --history-db-secret")
	f.StringVar(&o.HistoryDBSecret, "history-db-secret", "", "a Secret in fluxd's namespace holding the PostgreSQL database the replicas share: key \"url\" (postgres://USER@HOST:PORT/DB?sslmode=..., no password) and key \"password\"")
	f.BoolVar(&o.NoNamespace, "no-namespace", false, "leave the Namespace out, to install into one that exists (its own Pod Security labels then apply)")
	return cmd
}

func runInstall(w io.Writer, o deploy.Options) error {
	if o.GitURL == "" {
		return errors.New("--git-url is required: the remote fluxd releases through, e.g. ssh://git@github.com/org/manifests.git")
	}
	if o.Image == "" {
		o.Image = "fluxd:unset" // to check the other options first
		if _, err := deploy.Render(o); err != nil {
			return err
		}
		return errors.New(`--image is required: the fluxd image to run, e.g. registry.example.com/fluxd:v1.2.3.
No fluxd image is published: 'make image IMAGE=registry.example.com/fluxd:TAG' builds and pushes one.
To render a running install again, give the image it runs:
  kubectl -n fluxd get deployment fluxd -o jsonpath='{.spec.template.spec.containers[0].image}'`)
	}
	b, err := deploy.Render(o)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
