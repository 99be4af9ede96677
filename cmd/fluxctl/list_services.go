package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newListServicesCommand(g *globals) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:     "list-services",
		Aliases: []string{"services"},
		Short:   "List the services (workloads) fluxd knows",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("list-services lists every service and takes no name (got %q): for one service's images and policy use 'fluxctl list-images %s'; to list one namespace use -n NAMESPACE", args[0], args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runListServices(ctx, cmd.OutOrStdout(), c, namespace, g.output)
			})
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "only this namespace (default: all)")
	addOutputFlag(cmd, g)
	return cmd
}

// serviceJSON is the stable JSON shape of one service.
type serviceJSON struct {
	ID         string            `json:"id"`
	Status     string            `json:"status"`
	InGit      bool              `json:"inGit"`
	Automated  bool              `json:"automated"`
	Locked     bool              `json:"locked"`
	LockMsg    string            `json:"lockMessage,omitempty"`
	Containers []containerJSON   `json:"containers"`
	Replicas   replicasJSON      `json:"replicas"`
	TagFilters map[string]string `json:"tagFilters,omitempty"`
	TagOrder   string            `json:"tagOrder,omitempty"`
	Automation *automationJSON   `json:"automation,omitempty"`
	Warnings   []string          `json:"warnings,omitempty"`
	SyncState  string            `json:"syncState,omitempty"`
	SyncDetail string            `json:"syncDetail,omitempty"`
}

type automationJSON struct {
	State     string     `json:"state"`
	Next      *time.Time `json:"next,omitempty"`
	JobID     string     `json:"jobId,omitempty"`
	LastError string     `json:"lastError,omitempty"`
	Failures  int32      `json:"failures,omitempty"`
	Decision  string     `json:"decision,omitempty"`
}

type containerJSON struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	Init  bool   `json:"init,omitempty"`
	// Goal is the image git defines, when another runs.
	Goal string `json:"goal,omitempty"`
}

type replicasJSON struct {
	Desired   int32 `json:"desired"`
	Updated   int32 `json:"updated"`
	Ready     int32 `json:"ready"`
	Available int32 `json:"available"`
}

func runListServices(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, namespace, output string) error {
	resp, err := c.ListServices(ctx, &fluxdv1.ListServicesRequest{Namespace: namespace})
	if err != nil {
		return err
	}
	if output != "table" {
		out := []serviceJSON{}
		for _, s := range resp.GetServices() {
			sj := serviceJSON{ID: s.GetId(), Status: s.GetStatus(), InGit: s.GetInGit(), Automated: s.GetAutomated(), Locked: s.GetLocked(), LockMsg: s.GetLockMessage(), Containers: []containerJSON{}}
			for _, c := range s.GetContainers() {
				sj.Containers = append(sj.Containers, containerJSON{Name: c.GetName(), Image: c.GetImage(), Init: c.GetInit(), Goal: c.GetGoal()})
			}
			r := s.GetReplicas()
			sj.Replicas = replicasJSON{Desired: r.GetDesired(), Updated: r.GetUpdated(), Ready: r.GetReady(), Available: r.GetAvailable()}
			sj.TagFilters, sj.TagOrder, sj.Warnings = s.GetTagFilters(), s.GetTagOrder(), s.GetWarnings()
			sj.SyncState, sj.SyncDetail = s.GetSyncState(), s.GetSyncDetail()
			if a := s.GetAutomation(); a != nil {
				aj := &automationJSON{State: a.GetState(), JobID: a.GetJobId(), LastError: a.GetLastError(), Failures: a.GetFailures(), Decision: a.GetDecision()}
				if a.GetNext() != nil {
					t := a.GetNext().AsTime()
					aj.Next = &t
				}
				sj.Automation = aj
			}
			out = append(out, sj)
		}
		return writeData(w, output, out)
	}
	if len(resp.GetServices()) == 0 {
		if namespace != "" {
			_, err := fmt.Fprintf(w, "No services in namespace %q: it is empty, does not exist, or is not one fluxd watches (its --watch-namespace) or may show to your token's instance. 'fluxctl list-services' without -n lists every namespace's.\n", namespace)
			return err
		}
		_, err := fmt.Fprintln(w, "No services: fluxd sees no workload in the namespaces it watches, nor any in git under its --git-path.")
		return err
	}
	// The SYNC and GOAL columns show only when fluxd syncs or an image
	// differs from git's, so the common table stays narrow.
	syncCol, goalCol := false, false
	for _, s := range resp.GetServices() {
		syncCol = syncCol || s.GetSyncState() != ""
		for _, c := range s.GetContainers() {
			goalCol = goalCol || c.GetGoal() != ""
		}
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	header := "SERVICE\tSTATUS\tREADY\tPOLICY\tAUTOMATION\tCONTAINER\tIMAGE"
	if syncCol {
		header = "SERVICE\tSTATUS\tSYNC\tREADY\tPOLICY\tAUTOMATION\tCONTAINER\tIMAGE"
	}
	if goalCol {
		header += "\tGOAL"
	}
	fmt.Fprintln(tw, header)
	var warnings, syncNotes []string
	for _, s := range resp.GetServices() {
		r := s.GetReplicas()
		status := s.GetStatus()
		if syncCol {
			status += "\t" + orDash(s.GetSyncState())
		}
		if d := s.GetSyncDetail(); d != "" {
			syncNotes = append(syncNotes, s.GetId()+": "+s.GetSyncState()+": "+d)
		}
		ready := fmt.Sprintf("%d/%d", r.GetReady(), r.GetDesired())
		if !s.GetInGit() {
			ready += " (not in git)"
		}
		ready += "\t" + policy(s) + "\t" + automation(s.GetAutomation(), time.Now())
		if len(s.GetContainers()) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\n", s.GetId(), status, ready)
		}
		for i, c := range s.GetContainers() {
			name := c.GetName()
			if c.GetInit() {
				name += " (init)"
			}
			image := c.GetImage()
			if goalCol {
				image += "\t" + orDash(c.GetGoal())
			}
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.GetId(), status, ready, name, image)
			} else {
				pad := "\t\t\t\t\t"
				if syncCol {
					pad += "\t"
				}
				fmt.Fprintf(tw, "%s%s\t%s\n", pad, name, image)
			}
		}
		for _, w := range s.GetWarnings() {
			warnings = append(warnings, s.GetId()+": "+w)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(syncNotes) > 0 {
		fmt.Fprintf(w, "\nAgainst git:\n")
		for _, x := range syncNotes {
			fmt.Fprintf(w, "  %s\n", x)
		}
	}
	if len(warnings) > 0 {
		fmt.Fprintf(w, "\nWarnings (policies to fix):\n")
		for _, x := range warnings {
			fmt.Fprintf(w, "  %s\n", x)
		}
	}
	if msg := gitWarning(resp.GetGit(), time.Now()); msg != "" {
		fmt.Fprintf(w, "\nWarning: %s\n", msg)
	}
	return nil
}

// gitWarning describes a git remote that is failing or not answering, or
// returns "" when it is well.
func gitWarning(g *fluxdv1.GitRemoteStatus, now time.Time) string {
	if g == nil {
		return ""
	}
	since := "never synced"
	if g.GetLastSync() != nil {
		since = fmt.Sprintf("last synced %s ago", now.Sub(g.GetLastSync().AsTime()).Round(time.Second))
	}
	switch {
	case g.GetWaiting() != "" && g.GetWaitingSince() != nil && now.Sub(g.GetWaitingSince().AsTime()) > 5*time.Second:
		return fmt.Sprintf("the git remote has not answered for %s (%s; %s): the git side shown is as of then", now.Sub(g.GetWaitingSince().AsTime()).Round(time.Second), g.GetWaiting(), since)
	case g.GetError() != "":
		return fmt.Sprintf("the git remote failed (%s): %s; the git side shown is as of then", since, g.GetError())
	}
	return ""
}

// lockNoteMax bounds who and why a service is locked, in the table; -o
// json has the whole message.
const lockNoteMax = 32

// lockNote is " (who: why)" for a locked service, shortened to fit the
// table, or "" when the lock says neither. fluxd's lock message reads
// "locked by WHO: WHY"; who comes from locked_by.
func lockNote(s *fluxdv1.Service) string {
	who := s.GetLockedBy()
	why := strings.TrimPrefix(s.GetLockMessage(), lockedPrefix)
	if who != "" {
		why = strings.TrimPrefix(why, " by "+who)
	}
	why = strings.TrimSpace(strings.TrimPrefix(why, ":"))
	var note string
	switch {
	case who != "" && why != "":
		note = who + ": " + why
	case who != "":
		note = who
	default:
		note = why
	}
	if note == "" {
		return ""
	}
	if r := []rune(note); len(r) > lockNoteMax {
		note = string(r[:lockNoteMax-1]) + "…"
	}
	return " (" + note + ")"
}

// lockedPrefix begins fluxd's lock messages (release.ReasonLocked).
const lockedPrefix = "locked"

func policy(s *fluxdv1.Service) string {
	var p []string
	if s.GetAutomated() {
		p = append(p, "automated")
	}
	if s.GetLocked() {
		p = append(p, "locked"+lockNote(s))
	}
	var cs []string
	for c := range s.GetTagFilters() {
		cs = append(cs, c)
	}
	sort.Strings(cs)
	for _, c := range cs {
		if c == "*" {
			p = append(p, "tags="+s.GetTagFilters()[c])
		} else {
			p = append(p, "tag."+c+"="+s.GetTagFilters()[c])
		}
	}
	if o := s.GetTagOrder(); o != "" {
		p = append(p, "order="+o)
	}
	if s.GetTagPrerelease() {
		p = append(p, "prerelease")
	}
	if len(p) == 0 {
		return "-"
	}
	return strings.Join(p, ",")
}

// automation says where the automator is with a service.
func automation(a *fluxdv1.Automation, now time.Time) string {
	if a == nil {
		return "-"
	}
	in := func() string {
		if a.GetNext() == nil {
			return ""
		}
		d := a.GetNext().AsTime().Sub(now).Round(time.Second)
		if d <= 0 {
			return " (due now)"
		}
		return " (next check in " + d.String() + ")"
	}
	switch a.GetState() {
	case "releasing":
		return "releasing, job " + a.GetJobId()
	case "failing":
		retry := "retry soon"
		if a.GetNext() != nil {
			retry = "retry in " + a.GetNext().AsTime().Sub(now).Round(time.Second).String()
		}
		return fmt.Sprintf("failing (%dx, %s): %s", a.GetFailures(), retry, a.GetLastError())
	case "uptodate":
		return "up to date" + in()
	case "waiting":
		return "waiting" + in()
	}
	return a.GetState()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
