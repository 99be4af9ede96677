package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fluxd/fluxd/check"
)

func newCheckCommand(g *globals) *cobra.Command {
	var paths []string
	cmd := &cobra.Command{
		Use:   "check [PATH]",
		Short: "Say what fluxd understands of a repository checkout, offline, before switching to fluxd",
		Long: `check reads a checkout of a repository (PATH, the current directory by
default) with the parsers fluxd uses, without a daemon, and lists every
workload with what fluxd understood of it: the dialect its annotations are
written in (fluxd, Flux v1, Keel), whether it is automated or locked, each
container's tag filter and whether its digest is pinned. It warns about
what fluxd cannot honour: unknown annotations, dialects that disagree,
Keel settings fluxd does not read. Argo CD Image Updater's annotations on
Application objects are reported with the fluxd annotations that mean the
same (fluxd does not read them as they are). See docs/migrate.md.

It also validates promotion Pipelines (fluxd.io/v1): each stage, its
services and gates, and every problem with its file and line, as fluxd
reads them; see docs/promotion.md.

It exits with status 1 when a file or document could not be read (the
"not read:" lines, or "problems" with -o json/yaml), after printing the
whole report, so that CI can run it before a merge. Warnings and
suggestions do not change the exit status.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			root := "."
			if len(args) == 1 {
				root = args[0]
			}
			return runCheck(cmd.OutOrStdout(), root, paths, g.output)
		},
	}
	cmd.Flags().StringSliceVar(&paths, "git-path", nil, "sub-directories of PATH to read, as fluxd's --git-path (default: all of it)")
	addOutputFlag(cmd, g)
	return cmd
}

func runCheck(w io.Writer, root string, paths []string, output string) error {
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s is not a directory: give the path of a checkout of the repository fluxd is to read (git clone URL DIR, then fluxctl check DIR)", root)
	}
	r, err := check.Repository(root, paths)
	if err != nil {
		return fmt.Errorf("%w; nothing was checked", err)
	}
	if output != "table" {
		if err := writeData(w, output, r); err != nil {
			return err
		}
		return problemsError(r.Problems)
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tDIALECT\tPOLICY\tCONTAINER\tIMAGE\tTAGS")
	var notes []string
	for _, s := range r.Services {
		dialect := strings.Join(s.Dialects, ", ")
		if dialect == "" {
			dialect = "-"
		}
		pol := policyOf(s)
		if len(s.Containers) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\n", s.ID, dialect, pol)
		}
		for i, c := range s.Containers {
			id := s.ID
			if i > 0 {
				id, dialect, pol = "", "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", id, dialect, pol, c.Name, c.Image, tagsOf(c))
		}
		for _, wn := range s.Warnings {
			notes = append(notes, s.ID+": warning: "+wn)
		}
		keys := make([]string, 0, len(s.Suggest))
		for k := range s.Suggest {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			notes = append(notes, fmt.Sprintf("%s: suggest %s: %q", s.ID, k, s.Suggest[k]))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Services) == 0 && len(r.Pipelines) == 0 {
		fmt.Fprintln(w, "(no workloads found: check PATH and --git-path)")
	} else if len(r.Services) == 0 {
		fmt.Fprintln(w, "(no workloads under these paths)")
	}
	if len(r.Pipelines) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "PIPELINE\tSTAGE\tFROM\tSERVICES\tGATES")
		for _, p := range r.Pipelines {
			id := p.ID
			for _, st := range p.Stages {
				from := st.From
				if from == "" {
					from = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", id, st.Name, from, strings.Join(st.Services, ", "), strings.Join(st.Gates, ", "))
				id = ""
			}
			for _, wn := range p.Warnings {
				notes = append(notes, p.ID+": warning: "+wn)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, p := range r.Problems {
		notes = append(notes, "not read: "+p)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	return problemsError(r.Problems)
}

// problemsError is the exit status of a check whose report names files
// or documents that could not be read: fluxd would skip them too.
func problemsError(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%d file(s) or document(s) could not be read (the \"not read\" lines above): fluxd would skip them at every sync and release; fix them, or narrow --git-path to leave them out", len(problems))
}

// policyOf is a service's policy in a few words.
func policyOf(s check.Service) string {
	var p []string
	if !s.Honoured {
		p = append(p, "not read")
	}
	if s.Automated {
		p = append(p, "automated")
	}
	if s.Locked {
		l := "locked"
		if s.LockMessage != "" {
			l += " (" + s.LockMessage + ")"
		}
		p = append(p, l)
	}
	if len(p) == 0 {
		return "manual"
	}
	return strings.Join(p, ", ")
}

// tagsOf is a container's tag policy in a few words.
func tagsOf(c check.Container) string {
	t := c.Filter
	if t == "" {
		t = "versions like the running one"
	}
	if c.Order != "" {
		t += " by " + c.Order
	}
	switch {
	case c.FollowsTag:
		t = "its tag's new digests"
	case c.Pinned:
		t += ", digest pinned"
	}
	return t
}
