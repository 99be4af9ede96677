package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fluxd/fluxd/history"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// historyClient answers History from memory and keeps the request.
type historyClient struct {
	fluxdv1.FluxServiceClient
	events []*fluxdv1.Event
	got    *fluxdv1.HistoryRequest
}

func (c *historyClient) History(_ context.Context, req *fluxdv1.HistoryRequest, _ ...grpc.CallOption) (*fluxdv1.HistoryResponse, error) {
	c.got = req
	return &fluxdv1.HistoryResponse{Events: c.events}, nil
}

// The table shows a multi-line message's first line in its row and the
// others indented under it, not as a literal \n; JSON keeps the message
// as it is.
func TestHistoryOutput(t *testing.T) {
	local := time.Local
	time.Local = time.UTC
	t.Cleanup(func() { time.Local = local })
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-d)) }
	c := &historyClient{events: []*fluxdv1.Event{
		{Id: 3, Type: "sync", User: "fluxd", Services: []string{"default:deployment/worker", "default:deployment/old"},
			Message: "applied abc123 (2 changed)\ndeleted Deployment/old\nconfigured Deployment/worker", Commit: "abc123def4567890",
			StartedAt: at(41 * time.Second), EndedAt: at(40 * time.Second)},
		{Id: 4, Type: "release", User: "ops", Services: []string{"default:deployment/api"},
			Message: "hotfix\n\nReleased unverified with --allow-unverified: default:deployment/api web=reg/web:2.0.1 (unsigned: profile signed: unsigned: no cosign signature for sha256:bbbb)",
			Changes: []*fluxdv1.Change{
				{Service: "default:deployment/api", Container: "app", From: "reg/api:1.0.0", To: "reg/api:1.1.0",
					Verification: &fluxdv1.Verification{Outcome: "verified", Profiles: []string{"signed"}, Digest: "sha256:aaaa", Detail: "profile signed: verified by key sha256:1234 (/etc/fluxd/cosign.pub)"}},
				{Service: "default:deployment/api", Container: "web", From: "reg/web:2.0.0", To: "reg/web:2.0.1",
					Verification: &fluxdv1.Verification{Outcome: "unsigned", Profiles: []string{"signed"}, Digest: "sha256:bbbb", Detail: "profile signed: unsigned: no cosign signature for sha256:bbbb"}},
			},
			Commit: "fedcba9876543210", StartedAt: at(20 * time.Second), EndedAt: at(10 * time.Second)},
		{Id: 2, Type: "automated-release", User: "fluxd", Services: []string{"default:deployment/worker"},
			Message:   "automated release of default:deployment/worker worker=reg/worker:1.0.1",
			Changes:   []*fluxdv1.Change{{Service: "default:deployment/worker", Container: "worker", From: "reg/worker:1.0.0", To: "reg/worker:1.0.1"}},
			Commit:    "0123456789abcdef",
			StartedAt: at(5 * time.Minute), EndedAt: at(4 * time.Minute)},
		{Id: 1, Type: "lock", User: "alex", Services: []string{"default:deployment/helloworld"}, Message: "incident 42: 5xx on checkout",
			StartedAt: at(3 * time.Hour), EndedAt: at(3 * time.Hour)},
	}}
	for _, o := range []string{"table", "json"} {
		t.Run(o, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runHistory(context.Background(), &buf, c, historyQuery{}, o, now); err != nil {
				t.Fatal(err)
			}
			golden(t, "history."+o, buf.Bytes())
		})
	}
}

// --type and --user reach the request; an unknown type is refused before
// any call, naming the types.
func TestHistoryFilters(t *testing.T) {
	c := &historyClient{}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	q := historyQuery{service: "worker", typ: "lock", user: "alex", limit: 5, since: "2h", until: "2026-12-01T11:30:00Z"}
	if err := q.validate(now); err != nil {
		t.Fatal(err)
	}
	if err := runHistory(context.Background(), &bytes.Buffer{}, c, q, "table", time.Now()); err != nil {
		t.Fatal(err)
	}
	want := &fluxdv1.HistoryRequest{Service: "worker", Type: "lock", User: "alex", Limit: 5}
	if c.got.GetService() != want.Service || c.got.GetType() != want.Type || c.got.GetUser() != want.User || c.got.GetLimit() != want.Limit {
		t.Errorf("request = %v, want %v", c.got, want)
	}
	if !c.got.GetSince().AsTime().Equal(now.Add(-2*time.Hour)) || !c.got.GetUntil().AsTime().Equal(now.Add(-30*time.Minute)) {
		t.Errorf("since, until = %v, %v; want 10:00 and 11:30", c.got.GetSince().AsTime(), c.got.GetUntil().AsTime())
	}
	for _, bad := range []historyQuery{{since: "yesterday"}, {since: "-2h"}, {since: "1h", until: "2h"}} {
		if err := bad.validate(now); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	err := (&historyQuery{typ: "relase"}).validate(now)
	if err == nil || !strings.Contains(err.Error(), `--type relase: there is no such event type; use one of release, automated-release`) {
		t.Errorf("unknown type: %v", err)
	}
}

// fluxctl's list of event types is fluxd's.
func TestEventTypesAreHistorys(t *testing.T) {
	var want []string
	for _, ty := range history.Types {
		want = append(want, string(ty))
	}
	slices.Sort(want)
	got := slices.Sorted(slices.Values(eventTypes))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("event types (-history.Types +fluxctl):\n%s", diff)
	}
}

func TestAgo(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "just now", 40 * time.Second: "40s ago", 90 * time.Second: "1m ago", 3 * time.Hour: "3h ago", 72 * time.Hour: "3d ago"} {
		if got := ago(d); got != want {
			t.Errorf("ago(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParseWhen(t *testing.T) {
	t.Parallel()
	loc := time.FixedZone("X", 3600)
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, loc)
	for in, want := range map[string]time.Time{
		"":                     {},
		"90m":                  now.Add(-90 * time.Minute),
		"3d":                   now.AddDate(0, 0, -3),
		"2026-11-30":           time.Date(2026, 11, 30, 0, 0, 0, 0, loc),
		"2026-11-30 14:05":     time.Date(2026, 11, 30, 14, 5, 0, 0, loc),
		"2026-11-30T14:05:00Z": time.Date(2026, 11, 30, 14, 5, 0, 0, time.UTC),
	} {
		got, err := parseWhen(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseWhen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
