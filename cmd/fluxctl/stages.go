package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newStagesCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stages [PIPELINE]",
		Short: "Show a pipeline's stages: each one's bundle, state, gates and what waits",
		Long: `stages shows each stage of a promotion pipeline (a Pipeline object in git):
the bundle it runs and that bundle's state there, its gates' progress (checks
passed, soak left, approvals), and what holds promotion into it (a pause by a
person, a locked service, or why the newest verified bundle of its from-stage
is not taken). Bundles waiting in a stage are listed under the table.

PIPELINE may be left out when fluxd reads one pipeline (that your token may
see); otherwise the error lists them. Give it as NAMESPACE/NAME where two
namespaces hold a pipeline of that name (and for a pipeline named "resume").
A token scoped to some namespaces sees only the stages whose services are all
in its scope. 'fluxctl stages resume' ends a pause.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			pipeline := ""
			if len(args) == 1 {
				pipeline = args[0]
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runStages(ctx, cmd.OutOrStdout(), c, pipeline, g.output, time.Now())
			})
		},
	}
	addOutputFlag(cmd, g)
	cmd.AddCommand(newStagesResumeCommand(g))
	return cmd
}

func newStagesResumeCommand(g *globals) *cobra.Command {
	var pipeline string
	cmd := &cobra.Command{
		Use:   "resume STAGE [--pipeline P]",
		Short: "End a pause of automatic promotion into a stage",
		Long: `resume ends the pause of automatic promotion into STAGE that a manual
promotion of anything but the newest verified bundle (or a rollback) set:
fluxd promotes the newest bundle verified in the stage's from-stage into it
again, as its gates allow. It needs the deployer role, with every service of
the stage in your token's scope.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				if _, err := c.ResumeStage(ctx, &fluxdv1.ResumeStageRequest{Pipeline: pipeline, Stage: args[0]}); err != nil {
					return err
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "Automatic promotion into stage %s resumed.\n", args[0])
				return err
			})
		},
	}
	cmd.Flags().StringVarP(&pipeline, "pipeline", "p", "", "the pipeline (default: the only one)")
	return cmd
}

// stagesJSON is the stable JSON shape of fluxctl stages.
type stagesJSON struct {
	Pipeline string      `json:"pipeline"`
	Stages   []stageJSON `json:"stages"`
}

type stageJSON struct {
	Name     string       `json:"name"`
	From     string       `json:"from,omitempty"`
	Services []string     `json:"services"`
	Current  *recordJSON  `json:"current,omitempty"`
	Waiting  []recordJSON `json:"waiting,omitempty"`
	// ChecksPassed of Checks passed for the current bundle.
	ChecksPassed int32 `json:"checksPassed"`
	Checks       int32 `json:"checks"`
	// SoakLeft is a Go duration ("4m30s"), empty when not soaking.
	SoakLeft  string     `json:"soakLeft,omitempty"`
	Approvals int32      `json:"approvals"`
	Paused    *pauseJSON `json:"paused,omitempty"`
	Locked    string     `json:"locked,omitempty"`
	Hold      string     `json:"hold,omitempty"`
}

type pauseJSON struct {
	By     string     `json:"by"`
	Reason string     `json:"reason,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
}

// recordJSON is one bundle's state in one stage.
type recordJSON struct {
	Stage      string     `json:"stage"`
	Bundle     string     `json:"bundle"`
	Status     string     `json:"status"`
	Reason     string     `json:"reason,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	RolledOut  *time.Time `json:"rolledOut,omitempty"`
	SoakUntil  *time.Time `json:"soakUntil,omitempty"`
	Passed     []string   `json:"passed,omitempty"`
	Approvers  []string   `json:"approvers,omitempty"`
	PromotedBy string     `json:"promotedBy,omitempty"`
	Current    bool       `json:"current,omitempty"`
}

func recordFromProto(r *fluxdv1.BundleRecord) recordJSON {
	return recordJSON{Stage: r.GetStage(), Bundle: r.GetBundle(), Status: r.GetStatus(), Reason: r.GetReason(),
		Since: timeOf(r.GetSince()), RolledOut: timeOf(r.GetRolledOut()), SoakUntil: timeOf(r.GetSoakUntil()),
		Passed: r.GetPassed(), Approvers: r.GetApprovers(), PromotedBy: r.GetPromotedBy(), Current: r.GetCurrent()}
}

// timeOf is a timestamp as JSON shows it: nil when unset.
func timeOf(ts *timestamppb.Timestamp) *time.Time {
	if ts == nil || !ts.IsValid() {
		return nil
	}
	t := ts.AsTime()
	return &t
}

func runStages(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, pipeline, output string, now time.Time) error {
	resp, err := c.ListStages(ctx, &fluxdv1.ListStagesRequest{Pipeline: pipeline})
	if err != nil {
		return err
	}
	if output != "table" {
		out := stagesJSON{Pipeline: resp.GetPipeline(), Stages: []stageJSON{}}
		for _, s := range resp.GetStages() {
			sj := stageJSON{Name: s.GetName(), From: s.GetFrom(), Services: s.GetServices(), ChecksPassed: s.GetChecksPassed(), Checks: s.GetChecks(),
				Approvals: s.GetApprovals(), Locked: s.GetLocked(), Hold: s.GetHold()}
			if sj.Services == nil {
				sj.Services = []string{}
			}
			if s.GetSoakLeftMs() > 0 {
				sj.SoakLeft = (time.Duration(s.GetSoakLeftMs()) * time.Millisecond).String()
			}
			if s.GetCurrent() != nil {
				r := recordFromProto(s.GetCurrent())
				sj.Current = &r
			}
			for _, r := range s.GetWaiting() {
				sj.Waiting = append(sj.Waiting, recordFromProto(r))
			}
			if p := s.GetPaused(); p != nil {
				sj.Paused = &pauseJSON{By: p.GetBy(), Reason: p.GetReason(), Since: timeOf(p.GetSince())}
			}
			out.Stages = append(out.Stages, sj)
		}
		return writeData(w, output, out)
	}
	if len(resp.GetStages()) == 0 {
		_, err := fmt.Fprintf(w, "Pipeline %s has no stage your token may see.\n", resp.GetPipeline())
		return err
	}
	fmt.Fprintf(w, "Pipeline %s\n", resp.GetPipeline())
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "STAGE\tFROM\tBUNDLE\tSTATE\tCHECKS\tSOAK LEFT\tAPPROVALS\tHOLD")
	var details []string
	for _, s := range resp.GetStages() {
		bundle, state := "-", "-"
		if cur := s.GetCurrent(); cur != nil {
			bundle, state = cur.GetBundle(), cur.GetStatus()
		}
		checks := "-"
		if s.GetChecks() > 0 {
			checks = fmt.Sprintf("%d/%d", s.GetChecksPassed(), s.GetChecks())
		}
		soak := "-"
		if s.GetSoakLeftMs() > 0 {
			soak = (time.Duration(s.GetSoakLeftMs()) * time.Millisecond).Round(time.Second).String()
		}
		approvals := "-"
		if s.GetApprovals() > 0 {
			// A bundle waiting's approvals, else the current bundle's
			// (what let it in).
			n := len(s.GetCurrent().GetApprovers())
			for _, r := range s.GetWaiting() {
				if r.GetStatus() == "awaiting approval" {
					n = len(r.GetApprovers())
				}
			}
			approvals = fmt.Sprintf("%d/%d", n, s.GetApprovals())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.GetName(), orDash(s.GetFrom()), bundle, state, checks, soak, approvals, holdOf(s, now))
		for _, r := range s.GetWaiting() {
			line := fmt.Sprintf("  %s: bundle %s %s", s.GetName(), r.GetBundle(), r.GetStatus())
			if r.GetStatus() == "awaiting approval" {
				line += fmt.Sprintf(" (%d of %d", len(r.GetApprovers()), s.GetApprovals())
				if len(r.GetApprovers()) > 0 {
					line += ": " + strings.Join(r.GetApprovers(), ", ")
				}
				line += "); approve with: fluxctl approve --stage " + s.GetName() + " " + r.GetBundle()
			}
			details = append(details, line)
		}
		if cur := s.GetCurrent(); cur != nil && cur.GetReason() != "" {
			details = append(details, fmt.Sprintf("  %s: bundle %s %s: %s", s.GetName(), cur.GetBundle(), cur.GetStatus(), cur.GetReason()))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(details) > 0 {
		fmt.Fprintln(w, "\nWaiting, and why:")
		for _, l := range details {
			fmt.Fprintln(w, l)
		}
	}
	return nil
}

// holdOf says what holds promotion into a stage: a pause, a lock, or the
// loop's reason.
func holdOf(s *fluxdv1.StageStatus, now time.Time) string {
	var out []string
	if p := s.GetPaused(); p != nil {
		h := "paused by " + p.GetBy()
		if p.GetSince() != nil {
			h += " " + ago(now.Sub(p.GetSince().AsTime()))
		}
		if p.GetReason() != "" {
			h += ": " + p.GetReason()
		}
		out = append(out, h+" (fluxctl stages resume "+s.GetName()+")")
	}
	if s.GetLocked() != "" {
		out = append(out, "locked: "+s.GetLocked())
	}
	// The loop's hold repeats a pause or a lock said above.
	if h := s.GetHold(); h != "" && !(s.GetPaused() != nil && strings.Contains(h, " is paused by ")) && !(s.GetLocked() != "" && strings.Contains(h, " is locked (")) {
		out = append(out, h)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, "; ")
}
