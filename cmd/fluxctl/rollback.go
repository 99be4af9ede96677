package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newRollbackCommand(g *globals) *cobra.Command {
	var rf releaseFlags
	var to string
	cmd := &cobra.Command{
		Use:   "rollback SERVICE [--to IMAGE]",
		Short: "Release a service's previous image, found in its history (or --to an earlier one), through git like any release",
		Long: `rollback releases the image a service ran before its last release, as
'argocd app rollback' does. It reads the service's history for the last
release that changed it and releases that release's "from" image, through
git: a plan you confirm, one commit, an apply and the rollout followed.
--to IMAGE releases an earlier image instead (fluxctl history SERVICE lists
them). Where the last release changed containers of several repositories,
give --to. An automated service is refused unless it is locked: the
automator would undo the rollback (deautomate or lock it first).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rf.spec.User == "" {
				rf.spec.User = currentUser()
			}
			interactive := isTerminal()
			if !rf.dryRun && !rf.noWait && !cmd.Flags().Changed("timeout") && os.Getenv("FLUX_TIMEOUT") == "" {
				g.timeout = 24 * time.Hour
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				if err := notAutomated(ctx, c, args[0]); err != nil {
					return err
				}
				image := to
				if image == "" {
					var err error
					if image, err = previousImage(ctx, c, args[0]); err != nil {
						return err
					}
				}
				rf.spec.Services, rf.spec.Image = []string{args[0]}, image
				if rf.spec.Message == "" {
					rf.spec.Message = "rollback to " + image
				}
				return runRelease(ctx, cmd.InOrStdin(), cmd.OutOrStdout(), c, &rf, interactive)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "the image to roll back to (default: the one before the service's last release)")
	f.BoolVar(&rf.dryRun, "dry-run", false, "only show the plan; change nothing")
	f.BoolVarP(&rf.yes, "yes", "y", false, "roll back without asking for confirmation")
	f.BoolVar(&rf.noWait, "no-wait", false, "print the job ID and return without following the job")
	f.DurationVar(&rf.rolloutTimeout, "rollout-timeout", 0, "fail if the rollout takes longer (default: fluxd's --rollout-timeout)")
	f.BoolVar(&rf.spec.Force, "force", false, "roll back even if the service is locked")
	f.StringVar(&rf.spec.User, "user", "", "who is rolling back (default: as for release)")
	f.StringVarP(&rf.spec.Message, "message", "m", "", "why (default: \"rollback to IMAGE\")")
	return cmd
}

// previousImage is the image a service ran before its last release that
// changed it, from its history.
func previousImage(ctx context.Context, c fluxdv1.FluxServiceClient, service string) (string, error) {
	resp, err := c.History(ctx, &fluxdv1.HistoryRequest{Service: service, Limit: 100})
	if err != nil {
		return "", err
	}
	for _, ev := range resp.GetEvents() {
		// Releases that succeeded: one that failed did not change what
		// runs for long (it was rolled back, or is still failing), and
		// a "rollback" row is such a revert.
		if t := ev.GetType(); t != "release" && t != "automated-release" || ev.GetError() != "" {
			continue
		}
		// A batch changes other services too: only this one's count.
		froms := map[string]bool{}
		for _, ch := range ev.GetChanges() {
			if names(ch.GetService(), service) && ch.GetFrom() != "" && ch.GetFrom() != ch.GetTo() {
				froms[ch.GetFrom()] = true
			}
		}
		switch len(froms) {
		case 0:
			continue
		case 1:
			for from := range froms {
				return from, nil
			}
		}
		var list []string
		for f := range froms {
			list = append(list, f)
		}
		return "", fmt.Errorf("the last release of %s changed several images (%s): say which to go back to with --to IMAGE", service, strings.Join(list, ", "))
	}
	return "", fmt.Errorf("no successful release of %s is recorded (failed and cancelled ones were rolled back already, and do not count), so there is no previous image to roll back to: give one with --to IMAGE ('fluxctl list-images %s' lists them)", service, service)
}

// names says whether what a person typed (a full ID, namespace/name,
// kind/name or name, as fluxd resolves it) names the service id
// ("namespace:kind/name"). fluxd's history query resolved it already; this
// only tells the services of one event apart.
func names(id, typed string) bool {
	if id == typed {
		return true
	}
	ns, rest, _ := strings.Cut(id, ":")
	kind, name, _ := strings.Cut(rest, "/")
	first, last, qualified := strings.Cut(typed, "/")
	if !qualified {
		return typed == name
	}
	if last != name {
		return false
	}
	k := strings.TrimSuffix(strings.SplitN(strings.ToLower(first), ".", 2)[0], "s")
	short := map[string]string{"deploy": "deployment", "st": "statefulset", "d": "daemonset", "cj": "cronjob"} // "sts", "ds" lost their "s" above
	return first == ns || k == kind || short[k] == kind
}

// notAutomated refuses to roll back a service the automator releases and
// nothing holds: it would release the newer image again at its next pass,
// undoing the rollback (as Argo CD refuses a rollback under auto-sync).
func notAutomated(ctx context.Context, c fluxdv1.FluxServiceClient, service string) error {
	resp, err := c.ListServices(ctx, &fluxdv1.ListServicesRequest{})
	if err != nil {
		return err
	}
	for _, s := range resp.GetServices() {
		if names(s.GetId(), service) && s.GetAutomated() && !s.GetLocked() {
			return fmt.Errorf(`%s is automated: the automator would release its newest image again at its next pass, undoing the rollback.
Stop it first, then roll back:
  fluxctl deautomate %s        # or: fluxctl lock %s -m "rolled back: why"`, s.GetId(), service, service)
		}
	}
	return nil
}
