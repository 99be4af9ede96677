package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// policy changes a service's policy annotations in git, in one commit;
// automate, deautomate, lock and unlock are shorthands for it.
func newPolicyCommand(g *globals) *cobra.Command {
	var (
		automate, deautomate, lock, unlock bool
		message, tagAll, order             string
		prerelease                         bool
		tags                               []string
	)
	cmd := &cobra.Command{
		Use:   "policy SERVICE",
		Short: "Change a service's policies: automation, lock, tag filters (one commit to git)",
		Long: `Change a service's policies. They are annotations on the workload in git,
committed in one commit, so they are auditable and survive anything.

Tag filters choose which tags automation and 'release --update-all-images'
may pick, per container (--tag CONTAINER=PATTERN) or for all (--tag-all):
  glob:main-*            tags matching a glob, newest build first
  regex:^build-(\d+)$    tags matching a regular expression
  semver:~1.2            a semver range (Masterminds syntax), highest version first
  semver:patch|minor|major  newer within the running version's minor, major, or any
Semver filters skip pre-releases unless the range names one (>=1.3.0-0) or
--tag-prerelease is set.
"*" clears a filter. --tag-order orders glob and regex filters by build
time (default), name (alphabetical) or number (numerical).`,
		Example: `  fluxctl policy web --automate --tag-all 'semver:~1.2'
  fluxctl policy web --tag app=glob:main-* --tag-order alphabetical
  fluxctl policy web --lock -m "incident 42"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &fluxdv1.SetPolicyRequest{Service: args[0], User: currentUser()}
			if automate && deautomate || lock && unlock {
				return errors.New("--automate and --deautomate (or --lock and --unlock) contradict each other; give one")
			}
			if automate || deautomate {
				req.Automated = &automate
			}
			if lock || unlock {
				req.Locked = &lock
				req.LockMessage = message
			} else if message != "" {
				return errors.New("-m gives the lock message; use it with --lock")
			}
			if cmd.Flags().Changed("tag-all") {
				req.TagAll = &tagAll
			}
			if cmd.Flags().Changed("tag-order") {
				req.TagOrder = &order
			}
			if cmd.Flags().Changed("tag-prerelease") {
				req.TagPrerelease = &prerelease
			}
			for _, t := range tags {
				c, p, ok := strings.Cut(t, "=")
				if !ok || c == "" {
					return fmt.Errorf("--tag %q: write CONTAINER=PATTERN, e.g. --tag app=semver:~1.2 (or app=* to clear)", t)
				}
				if req.TagFilters == nil {
					req.TagFilters = map[string]string{}
				}
				req.TagFilters[c] = p
			}
			return setPolicy(cmd, g, req)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&automate, "automate", false, "release new images by themselves")
	f.BoolVar(&deautomate, "deautomate", false, "stop automated releases")
	f.BoolVar(&lock, "lock", false, "stop every release of the service")
	f.BoolVar(&unlock, "unlock", false, "lift the lock")
	f.StringVarP(&message, "message", "m", "", "why the service is locked")
	f.StringVar(&tagAll, "tag-all", "", `tag filter for every container without its own ("*" clears)`)
	f.StringArrayVar(&tags, "tag", nil, `tag filter for one container, CONTAINER=PATTERN ("CONTAINER=*" clears); repeatable`)
	f.StringVar(&order, "tag-order", "", "order of glob and regex filters: time, alphabetical or numerical")
	f.BoolVar(&prerelease, "tag-prerelease", false, "let semver filters pass pre-releases (1.3.0-rc.1) of versions they admit; --tag-prerelease=false turns it off")
	return cmd
}

// setPolicy sends a policy change and says what it did.
func setPolicy(cmd *cobra.Command, g *globals, req *fluxdv1.SetPolicyRequest) error {
	return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
		resp, err := c.SetPolicy(ctx, req)
		if err != nil {
			return err
		}
		w := cmd.OutOrStdout()
		if resp.GetCommit() == "" {
			_, err = fmt.Fprintf(w, "%s already has that policy; nothing committed.\n", req.GetService())
			return err
		}
		var what []string
		if a := req.Automated; a != nil {
			what = append(what, map[bool]string{true: "automated (fluxd releases its newest images by itself)", false: "deautomated"}[*a])
		}
		if l := req.Locked; l != nil {
			what = append(what, map[bool]string{true: "locked (no release changes it until it is unlocked)", false: "unlocked"}[*l])
		}
		if t := req.TagAll; t != nil {
			what = append(what, filterChange("all containers", *t))
		}
		var cs []string
		for c := range req.GetTagFilters() {
			cs = append(cs, c)
		}
		sort.Strings(cs)
		for _, c := range cs {
			what = append(what, filterChange(c, req.GetTagFilters()[c]))
		}
		if o := req.TagOrder; o != nil {
			if *o == "" {
				what = append(what, "tag order cleared (by build time)")
			} else {
				what = append(what, "tag order: "+*o)
			}
		}
		if p := req.TagPrerelease; p != nil {
			what = append(what, map[bool]string{true: "semver filters pass pre-releases", false: "semver filters skip pre-releases"}[*p])
		}
		_, err = fmt.Fprintf(w, "Policy of %s changed: %s (commit %.12s).\n", req.GetService(), strings.Join(what, "; "), resp.GetCommit())
		return err
	})
}

func newAutomateCommand(g *globals) *cobra.Command {
	return shorthand(g, "automate", "Turn on automated releases for a service (policy --automate)", func(r *fluxdv1.SetPolicyRequest) { r.Automated = ptr(true) })
}

func newDeautomateCommand(g *globals) *cobra.Command {
	return shorthand(g, "deautomate", "Turn off automated releases for a service (policy --deautomate)", func(r *fluxdv1.SetPolicyRequest) { r.Automated = ptr(false) })
}

func newUnlockCommand(g *globals) *cobra.Command {
	return shorthand(g, "unlock", "Lift a service's lock (policy --unlock)", func(r *fluxdv1.SetPolicyRequest) { r.Locked = ptr(false) })
}

func newLockCommand(g *globals) *cobra.Command {
	var message string
	cmd := shorthand(g, "lock", "Stop all releases of a service, with a message saying why (policy --lock)", func(r *fluxdv1.SetPolicyRequest) {
		r.Locked, r.LockMessage = ptr(true), message
	})
	cmd.Flags().StringVarP(&message, "message", "m", "", "why the service is locked")
	return cmd
}

func shorthand(g *globals, name, short string, set func(*fluxdv1.SetPolicyRequest)) *cobra.Command {
	return &cobra.Command{
		Use:   name + " SERVICE",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &fluxdv1.SetPolicyRequest{Service: args[0], User: currentUser()}
			set(req)
			return setPolicy(cmd, g, req)
		},
	}
}

func ptr[T any](v T) *T { return &v }

// filterChange says what a tag filter change did; "*" or "" clears it.
func filterChange(who, f string) string {
	if f == "" || f == "*" {
		return "tag filter for " + who + " cleared"
	}
	return "tag filter for " + who + ": " + f
}
