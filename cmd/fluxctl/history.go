package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// eventTypes are the event types fluxd records (history.Types, which a
// test keeps this equal to: importing history would pull the registry
// client into fluxctl).
var eventTypes = []string{"release", "automated-release", "rollback", "failed", "cancelled", "automate", "deautomate", "lock", "unlock", "policy", "sync",
	"promoted", "verified", "promotion-failed", "awaiting-approval", "approved", "paused", "resumed"}

func newHistoryCommand(g *globals) *cobra.Command {
	var q historyQuery
	cmd := &cobra.Command{
		Use:   "history [SERVICE]",
		Short: "Show recorded events, newest first",
		Long: `Show recorded events, newest first.

--type keeps one type of event (` + strings.Join(eventTypes, ", ") + `);
--user keeps the events of users whose name contains it. A multi-line
message shows its further lines indented under its row. A released
image shows its signature verification where a profile applied
(fluxd --verify-config): [verified by KEY] or, released with
--allow-unverified, [UNVERIFIED: why]; -o json gives each change's
verification (outcome, profiles, digest, detail).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(g.output); err != nil {
				return err
			}
			if err := q.validate(time.Now()); err != nil {
				return err
			}
			if len(args) == 1 {
				q.service = args[0]
			}
			return g.call(cmd.Context(), func(ctx context.Context, c fluxdv1.FluxServiceClient) error {
				return runHistory(ctx, cmd.OutOrStdout(), c, q, g.output, time.Now())
			})
		},
	}
	cmd.Flags().Int32Var(&q.limit, "limit", 50, "at most this many events")
	cmd.Flags().StringVar(&q.typ, "type", "", "only events of this type: "+strings.Join(eventTypes, ", "))
	cmd.Flags().StringVar(&q.user, "user", "", "only events of users whose name contains this")
	cmd.Flags().StringVar(&q.since, "since", "", "only events that ended since then: a duration back from now (90m, 2h, 3d), a date (2026-11-30) or a time (RFC 3339)")
	cmd.Flags().StringVar(&q.until, "until", "", "only events that ended before then, in the same forms as --since")
	addOutputFlag(cmd, g)
	return cmd
}

// historyQuery is what history asks for.
type historyQuery struct {
	service, typ, user string
	limit              int32
	// since and until are as typed; sinceAt and untilAt as read by
	// validate, against its clock.
	since, until     string
	sinceAt, untilAt time.Time
}

// validate checks the query and reads its times against now.
func (q *historyQuery) validate(now time.Time) error {
	var err error
	if q.sinceAt, err = parseWhen(q.since, now); err != nil {
		return fmt.Errorf("--since %s: %w", q.since, err)
	}
	if q.untilAt, err = parseWhen(q.until, now); err != nil {
		return fmt.Errorf("--until %s: %w", q.until, err)
	}
	if !q.sinceAt.IsZero() && !q.untilAt.IsZero() && !q.sinceAt.Before(q.untilAt) {
		return fmt.Errorf("--since %s is not before --until %s: no event could match", q.since, q.until)
	}
	if q.typ != "" && !slices.Contains(eventTypes, q.typ) {
		return fmt.Errorf("--type %s: there is no such event type; use one of %s", q.typ, strings.Join(eventTypes, ", "))
	}
	if q.limit < 0 {
		return fmt.Errorf("--limit %d: give a positive number of events (0 means the server's default)", q.limit)
	}
	return nil
}

type eventJSON struct {
	ID        int64        `json:"id"`
	Type      string       `json:"type"`
	Services  []string     `json:"services"`
	User      string       `json:"user,omitempty"`
	Message   string       `json:"message,omitempty"`
	Commit    string       `json:"commit,omitempty"`
	Error     string       `json:"error,omitempty"`
	StartedAt time.Time    `json:"startedAt"`
	EndedAt   time.Time    `json:"endedAt"`
	Changes   []changeJSON `json:"changes"`
}

type changeJSON struct {
	Service   string `json:"service"`
	Container string `json:"container"`
	From      string `json:"from"`
	To        string `json:"to"`
	// Verification is what checking To's signatures found, where a
	// verification profile applied to it (as list-images' images have).
	Verification *verificationJSON `json:"verification,omitempty"`
}

// changeToJSON is a recorded change as -o json shows it.
func changeToJSON(ch *fluxdv1.Change) changeJSON {
	out := changeJSON{Service: ch.GetService(), Container: ch.GetContainer(), From: ch.GetFrom(), To: ch.GetTo()}
	if v := ch.GetVerification(); v != nil {
		out.Verification = &verificationJSON{Outcome: v.GetOutcome(), Profiles: v.GetProfiles(), Digest: v.GetDigest(), Detail: v.GetDetail()}
	}
	return out
}

// changeVerification is a released image's verification in a history
// line: "verified by SIGNER", or "UNVERIFIED: why" for an image released
// with --allow-unverified; "" where no profile applied.
func changeVerification(ch *fluxdv1.Change) string {
	v := changeToJSON(ch).Verification
	if v == nil || v.Outcome == "not-required" {
		return ""
	}
	cell := verifiedCell(v)
	if v.Outcome == "verified" {
		if by, ok := strings.CutPrefix(cell, "verified ("); ok {
			return "verified by " + strings.TrimSuffix(by, ")")
		}
		return cell
	}
	return "UNVERIFIED: " + cell
}

func runHistory(ctx context.Context, w io.Writer, c fluxdv1.FluxServiceClient, q historyQuery, output string, now time.Time) error {
	req := &fluxdv1.HistoryRequest{Service: q.service, Limit: q.limit, Type: q.typ, User: q.user}
	if !q.sinceAt.IsZero() {
		req.Since = timestamppb.New(q.sinceAt)
	}
	if !q.untilAt.IsZero() {
		req.Until = timestamppb.New(q.untilAt)
	}
	resp, err := c.History(ctx, req)
	if err != nil {
		return err
	}
	if output != "table" {
		out := []eventJSON{}
		for _, ev := range resp.GetEvents() {
			ej := eventJSON{ID: ev.GetId(), Type: ev.GetType(), Services: ev.GetServices(), User: ev.GetUser(), Message: ev.GetMessage(),
				Commit: ev.GetCommit(), Error: ev.GetError(), StartedAt: ev.GetStartedAt().AsTime(), EndedAt: ev.GetEndedAt().AsTime(), Changes: []changeJSON{}}
			if ej.Services == nil {
				ej.Services = []string{}
			}
			for _, ch := range ev.GetChanges() {
				ej.Changes = append(ej.Changes, changeToJSON(ch))
			}
			out = append(out, ej)
		}
		return writeData(w, output, out)
	}
	if len(resp.GetEvents()) == 0 {
		_, err := fmt.Fprintln(w, "No events recorded.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
	fmt.Fprintln(tw, "ENDED\tTYPE\tUSER\tDESCRIPTION")
	for _, ev := range resp.GetEvents() {
		// When it ended: rows are in the order they were recorded, and a
		// release that failed or was rolled back ends after its rollback.
		t := ev.GetEndedAt().AsTime()
		if ev.GetEndedAt() == nil {
			t = ev.GetStartedAt().AsTime()
		}
		// A multi-line description (a sync's message lists one line per
		// object) shows its first line in the row and the others
		// indented under it, in the description's column.
		lines := strings.Split(strings.TrimRight(describe(ev), "\n"), "\n")
		fmt.Fprintf(tw, "%s (%s)\t%s\t%s\t%s\n", t.Local().Format("2006-01-02 15:04:05"), ago(now.Sub(t)), ev.GetType(), ev.GetUser(), lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(tw, "\t\t\t  %s\n", strings.TrimRight(l, "\r"))
		}
	}
	return tw.Flush()
}

func describe(ev *fluxdv1.Event) string {
	var parts []string
	for _, ch := range ev.GetChanges() {
		part := fmt.Sprintf("%s %s: %s -> %s", ch.GetService(), ch.GetContainer(), ch.GetFrom(), shortTarget(ch.GetFrom(), ch.GetTo()))
		if v := changeVerification(ch); v != "" {
			part += " [" + v + "]"
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		parts = append(parts, strings.Join(ev.GetServices(), ", "))
	}
	d := strings.Join(parts, "; ")
	if ev.GetCommit() != "" {
		d += fmt.Sprintf(" (commit %.12s)", ev.GetCommit())
	}
	if ev.GetError() != "" {
		d += ": " + ev.GetError()
	}
	if m := ev.GetMessage(); m != "" {
		d += ` "` + strings.ReplaceAll(m, "\t", " ") + `"`
	}
	return d
}

func ago(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// parseWhen reads a point in time as people type it: a duration back from
// now (Go's, plus days: "3d"), a date (local midnight), a local date and
// time, or RFC 3339. "" is no time.
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, errors.New("give a duration back from now without a sign, such as 2h")
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("not a time: give a duration back from now (90m, 2h, 3d), a date (2026-11-30), a local time (2026-11-30 14:00) or RFC 3339 (2026-11-30T14:00:00Z)")
}
