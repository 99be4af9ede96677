package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func newJobsCommand(g *globals) *cobra.Command {
	var limit int32
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List recent release jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				resp, err := c.ListJobs(ctx, &fluxdv1.ListJobsRequest{Limit: limit})
				if err != nil {
					return err
				}
				return printJobs(cmd.OutOrStdout(), resp.GetJobs(), g.output, time.Now())
			})
		},
	}
	cmd.Flags().Int32Var(&limit, "limit", 20, "at most this many jobs")
	addOutputFlag(cmd, g)
	return cmd
}

func newJobCommand(g *globals) *cobra.Command {
	var watch, log bool
	cmd := &cobra.Command{
		Use:   "job ID",
		Short: "Show one release job; --watch follows it until it ends",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			if watch {
				// Following a job may take as long as its rollout.
				g.timeout = 24 * time.Hour
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				if watch {
					return followJob(ctx, cmd.OutOrStdout(), c, args[0], isTerminal())
				}
				resp, err := c.GetJob(ctx, &fluxdv1.GetJobRequest{Id: args[0]})
				if err != nil {
					return err
				}
				if g.output != "table" {
					return writeData(cmd.OutOrStdout(), g.output, toJobJSON(resp.GetJob(), time.Now()))
				}
				printJob(cmd.OutOrStdout(), resp.GetJob(), time.Now())
				if log {
					return printJobLog(ctx, cmd.OutOrStdout(), c, args[0])
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the job until it ends")
	cmd.Flags().BoolVar(&log, "log", false, "print the job's log after it")
	addOutputFlag(cmd, g)
	return cmd
}

func newCancelCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel JOB",
		Short: "Cancel a release job: a queued one is dropped, a running one stops before its push or is rolled back after it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				resp, err := c.CancelJob(ctx, &fluxdv1.CancelJobRequest{Id: args[0]})
				if err != nil {
					return err
				}
				switch {
				case resp.GetJob().GetState() == fluxdv1.JobState_JOB_STATE_CANCELLED:
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "Job %s cancelled; nothing was pushed.\n", args[0])
				case resp.GetJob().GetCommit() != "":
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "Job %s had pushed %.12s: it is being rolled back; 'fluxctl job %s --watch' follows it.\n", args[0], resp.GetJob().GetCommit(), args[0])
				default:
					_, err = fmt.Fprintf(cmd.OutOrStdout(), "Job %s is stopping before its push; 'fluxctl job %s' shows when it has.\n", args[0], args[0])
				}
				return err
			})
		},
	}
}

func stateName(s fluxdv1.JobState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "JOB_STATE_"))
}

type jobJSON struct {
	ID         string       `json:"id"`
	Type       string       `json:"type,omitempty"`
	User       string       `json:"user,omitempty"`
	State      string       `json:"state"`
	Stage      string       `json:"stage"`
	Position   int32        `json:"queuePosition,omitempty"`
	Changes    []changeJSON `json:"changes"`
	Commit     string       `json:"commit,omitempty"`
	Error      string       `json:"error,omitempty"`
	CreatedAt  time.Time    `json:"createdAt"`
	FinishedAt *time.Time   `json:"finishedAt,omitempty"`
	// DurationSeconds is from creation to the end, or to now for a job
	// still live.
	DurationSeconds float64 `json:"durationSeconds"`
}

func toJobJSON(j *fluxdv1.Job, now time.Time) jobJSON {
	jj := jobJSON{ID: j.GetId(), Type: j.GetType(), User: j.GetUser(), State: stateName(j.GetState()), Stage: j.GetStage(), Position: j.GetQueuePosition(),
		Changes: jobChanges(j), Commit: j.GetCommit(), Error: j.GetError(), CreatedAt: j.GetCreatedAt().AsTime()}
	end := now
	if j.GetFinishedAt() != nil {
		t := j.GetFinishedAt().AsTime()
		jj.FinishedAt, end = &t, t
	}
	jj.DurationSeconds = end.Sub(jj.CreatedAt).Round(time.Millisecond).Seconds()
	return jj
}

// jobChanges are the image changes a job's plan makes.
func jobChanges(j *fluxdv1.Job) []changeJSON {
	out := []changeJSON{}
	for _, it := range j.GetPlan().GetItems() {
		for _, u := range it.GetUpdates() {
			out = append(out, changeJSON{Service: it.GetService(), Container: u.GetContainer(), From: u.GetCurrent(), To: u.GetTarget()})
		}
	}
	return out
}

// changesCell says a job's changes in one table cell: the first, and how
// many more.
func changesCell(chs []changeJSON) string {
	if len(chs) == 0 {
		return "-"
	}
	c := chs[0]
	s := fmt.Sprintf("%s %s: %s -> %s", shortService(c.Service), c.Container, c.From, shortTarget(c.From, c.To))
	if len(chs) > 1 {
		s += fmt.Sprintf(" (+%d more)", len(chs)-1)
	}
	return s
}

// shortService drops the namespace and kind of "default:deployment/web"
// when the table has little room: the JSON keeps the whole ID.
func shortService(id string) string {
	if _, name, ok := strings.Cut(id, "/"); ok {
		return name
	}
	return id
}

func printJobs(w io.Writer, jobs []*fluxdv1.Job, output string, now time.Time) error {
	if output != "table" {
		out := []jobJSON{}
		for _, j := range jobs {
			out = append(out, toJobJSON(j, now))
		}
		return writeData(w, output, out)
	}
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(w, "No jobs.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tCREATED\tTYPE\tUSER\tSTATE\tSTAGE\tTOOK\tCHANGES\tCOMMIT\tERROR")
	for _, j := range jobs {
		jj := toJobJSON(j, now)
		state := jj.State
		if p := j.GetQueuePosition(); p > 0 {
			state += fmt.Sprintf(" (#%d)", p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.12s\t%s\n", j.GetId(), ago(now.Sub(jj.CreatedAt)), orDash(jj.Type), orDash(jj.User), state, j.GetStage(),
			took(time.Duration(jj.DurationSeconds*float64(time.Second))), changesCell(jj.Changes), orDash(j.GetCommit()), j.GetError())
	}
	return tw.Flush()
}

// jobView shows a followed job: as plain lines, or as progress bars on a
// terminal.
type jobView interface {
	update(u *fluxdv1.WatchJobResponse)
	close()
}

// followJob shows a job's stages and rollout progress until it ends, and
// fails if the job did not succeed.
func followJob(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, id string, bars bool) error {
	stream, err := c.WatchJob(ctx, &fluxdv1.WatchJobRequest{Id: id})
	if err != nil {
		return err
	}
	var view jobView = &lineView{w: w, id: id}
	if bars {
		view = newBarView(ctx, w, id)
	}
	var last *fluxdv1.Job
	for {
		u, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			view.close()
			return err
		}
		last = u.GetJob()
		view.update(u)
	}
	view.close()
	if last == nil {
		return fmt.Errorf("job %s: no report received", id)
	}
	switch last.GetState() {
	case fluxdv1.JobState_JOB_STATE_SUCCEEDED:
		if last.GetStage() == stageNotRolledOut {
			// Not a failure, and not a rollout either: say which.
			fmt.Fprintf(w, "Committed and applied, NOT rolled out: commit %.12s pushed and applied; %s.\n", last.GetCommit(), strings.TrimPrefix(last.GetError(), "committed and applied, not rolled out: "))
			return nil
		}
		if last.GetCommit() == "" {
			// A job whose services were up to date by its turn (an
			// automated release whose service was deautomated, locked
			// or released meanwhile) commits nothing: say so, not
			// "Released" with no commit.
			fmt.Fprintln(w, "Nothing released: by this job's turn its services were already up to date (or no longer to be released); nothing was committed or pushed.")
			return nil
		}
		fmt.Fprintf(w, "Released: commit %.12s pushed, applied and rolled out.\n", last.GetCommit())
		return nil
	case fluxdv1.JobState_JOB_STATE_CANCELLED:
		return cancelledError(id, last.GetError())
	case fluxdv1.JobState_JOB_STATE_FAILED:
		return fmt.Errorf("job %s failed: %s", id, last.GetError())
	}
	return fmt.Errorf("job %s is still %s, but fluxd stopped sending its progress (it may be restarting, or another replica taking over: the job is carried on, not lost); follow it with 'fluxctl job %s --watch'", id, stateName(last.GetState()), id)
}

// stageNotRolledOut is the stage of a job whose release was committed
// and applied but whose rollout nothing reported on (a HelmRelease with
// no helm-controller): release.StageNotRolledOut.
const stageNotRolledOut = "applied, not rolled out"

// lineView prints a line per change.
type lineView struct {
	w        io.Writer
	id, last string
}

func (v *lineView) update(u *fluxdv1.WatchJobResponse) {
	j := u.GetJob()
	line := fmt.Sprintf("job %s: %s", v.id, j.GetStage())
	if p := j.GetQueuePosition(); p > 0 {
		line += fmt.Sprintf(" (position %d in the queue)", p)
	}
	for _, wp := range u.GetWorkloads() {
		r := wp.GetReplicas()
		line += fmt.Sprintf("\n  %s: %d/%d updated, %d ready, %d available", wp.GetService(), r.GetUpdated(), r.GetDesired(), r.GetReady(), r.GetAvailable())
	}
	if line != v.last {
		fmt.Fprintln(v.w, line)
		v.last = line
	}
}

func (v *lineView) close() {}

// cancelledError says a job was cancelled once: the job's own error already
// starts with "cancelled" ("cancelled while queued", "cancelled: ...").
func cancelledError(id, why string) error {
	why = strings.TrimPrefix(why, "cancelled: ")
	if strings.HasPrefix(why, "cancelled") {
		return fmt.Errorf("job %s was %s", id, why)
	}
	return fmt.Errorf("job %s was cancelled: %s", id, why)
}

// took is a duration as a person reads it.
func took(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// printJob shows one job: what it is, how it went, and its plan.
func printJob(w io.Writer, j *fluxdv1.Job, now time.Time) {
	jj := toJobJSON(j, now)
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	state := jj.State
	if jj.Position > 0 {
		state += fmt.Sprintf(" (position %d in the queue)", jj.Position)
	}
	fmt.Fprintf(tw, "Job:\t%s\n", jj.ID)
	fmt.Fprintf(tw, "Type:\t%s\n", orDash(jj.Type))
	fmt.Fprintf(tw, "User:\t%s\n", orDash(jj.User))
	fmt.Fprintf(tw, "State:\t%s (stage %s)\n", state, jj.Stage)
	fmt.Fprintf(tw, "Created:\t%s (%s)\n", jj.CreatedAt.Local().Format("2006-01-02 15:04:05"), ago(now.Sub(jj.CreatedAt)))
	if jj.FinishedAt != nil {
		fmt.Fprintf(tw, "Ended:\t%s, after %s\n", jj.FinishedAt.Local().Format("2006-01-02 15:04:05"), took(time.Duration(jj.DurationSeconds*float64(time.Second))))
	}
	if jj.Commit != "" {
		fmt.Fprintf(tw, "Commit:\t%s\n", jj.Commit)
	}
	if jj.Error != "" {
		fmt.Fprintf(tw, "Error:\t%s\n", jj.Error)
	}
	tw.Flush()
	if len(jj.Changes) > 0 {
		fmt.Fprintln(w, "Changes:")
		for _, c := range jj.Changes {
			fmt.Fprintf(w, "  %s %s: %s -> %s\n", c.Service, c.Container, c.From, shortTarget(c.From, c.To))
		}
	}
}

// printJobLog prints a job's log, every page of it.
func printJobLog(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, id string) error {
	fmt.Fprintln(w, "Log:")
	var after int64
	for {
		resp, err := c.GetJobLog(ctx, &fluxdv1.GetJobLogRequest{Id: id, After: after})
		if err != nil {
			return err
		}
		lines := resp.GetLines()
		if len(lines) == 0 {
			return nil
		}
		for _, l := range lines {
			fmt.Fprintf(w, "  %s  %-12s %s\n", l.GetTime().AsTime().Local().Format("15:04:05.000"), l.GetStage(), l.GetText())
			after = l.GetSeq()
		}
	}
}
