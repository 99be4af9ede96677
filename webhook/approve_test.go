package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/promotion"
)

// stageProd asks for two approvals.
var stageProd = promotion.Stage{Name: "prod", From: "staging", Approvals: 2}

// recordingApprover steps one record awaiting approval by the real state
// machine, which counts each approver once, and keeps who approved.
type recordingApprover struct {
	mu  sync.Mutex
	rec promotion.Record
	bys []string
}

func (a *recordingApprover) Approve(_ context.Context, pipeline, stage, bundle, by string) (promotion.Record, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pipeline != "web" || stage != "prod" || !strings.HasPrefix(a.rec.Bundle, bundle) {
		return promotion.Record{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("no bundle %s in stage %s of pipeline %s", bundle, stage, pipeline), "")
	}
	a.bys = append(a.bys, by)
	r, err := promotion.Advance(a.rec, stageProd, promotion.Event{Kind: promotion.EvApproved, By: by}, time.Unix(1_700_000_000, 0))
	if err != nil {
		return promotion.Record{}, err
	}
	a.rec = r
	return r, nil
}

func newTestApprovals(t *testing.T) (*Approvals, *recordingApprover, time.Time) {
	t.Helper()
	ra := &recordingApprover{rec: promotion.Record{Pipeline: "web", Stage: "prod", Bundle: "3f9a0c1d2e4b", Status: promotion.AwaitingApproval}}
	a, err := NewApprovals(ra, "circleci", []byte("ci-s3cret"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	a.now = func() time.Time { return now }
	return a, ra, now
}

func postApproval(t *testing.T, a *Approvals, body string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, ApprovePath, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	return rec
}

// An approval is taken only signed, with a timestamp within five minutes
// of fluxd's clock: a bad signature, a stale or future timestamp, a
// signature without a timestamp and the bare secret are all refused, and
// none reaches the promotion loop.
func TestApprovalSignature(t *testing.T) {
	const body = `{"pipeline":"web","stage":"prod","bundle":"3f9a0c1d2e4b","by":"deploy-job-81"}`
	at := func(now time.Time, d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	for _, tc := range []struct {
		name   string
		header func(now time.Time) map[string]string
		want   int
	}{
		{"signed now", func(now time.Time) map[string]string {
			return map[string]string{TimestampHeader: at(now, 0), SignatureHeader: sign("ci-s3cret", at(now, 0), body)}
		}, http.StatusOK},
		{"signed 4m ago", func(now time.Time) map[string]string {
			return map[string]string{TimestampHeader: at(now, -4*time.Minute), SignatureHeader: sign("ci-s3cret", at(now, -4*time.Minute), body)}
		}, http.StatusOK},
		{"stale: 6m ago", func(now time.Time) map[string]string {
			return map[string]string{TimestampHeader: at(now, -6*time.Minute), SignatureHeader: sign("ci-s3cret", at(now, -6*time.Minute), body)}
		}, http.StatusUnauthorized},
		{"6m ahead", func(now time.Time) map[string]string {
			return map[string]string{TimestampHeader: at(now, 6*time.Minute), SignatureHeader: sign("ci-s3cret", at(now, 6*time.Minute), body)}
		}, http.StatusUnauthorized},
		{"wrong secret", func(now time.Time) map[string]string {
			return map[string]string{TimestampHeader: at(now, 0), SignatureHeader: sign("s3cret", at(now, 0), body)}
		}, http.StatusUnauthorized},
		{"timestamp not signed", func(now time.Time) map[string]string {
			return map[string]string{TimestampHeader: at(now, 0), SignatureHeader: sign("ci-s3cret", "", body)}
		}, http.StatusUnauthorized},
		{"no timestamp", func(time.Time) map[string]string {
			return map[string]string{SignatureHeader: sign("ci-s3cret", "", body)}
		}, http.StatusUnauthorized},
		{"the bare secret", func(time.Time) map[string]string {
			return map[string]string{"X-Fluxd-Secret": "ci-s3cret", "Authorization": "Bearer ci-s3cret"}
		}, http.StatusUnauthorized},
		{"nothing", func(time.Time) map[string]string { return nil }, http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, ra, now := newTestApprovals(t)
			rec := postApproval(t, a, body, tc.header(now))
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			want := []string(nil)
			if tc.want == http.StatusOK {
				want = []string{"webhook:circleci"}
			}
			if diff := cmp.Diff(want, ra.bys); diff != "" {
				t.Errorf("approvals reaching the loop (-want +got):\n%s", diff)
			}
		})
	}
}

// The approver is always the secret's key name: whoever holds the secret
// could send any by, so a by never counts as another approver; a bad
// body is refused with what to send.
func TestApprovalBody(t *testing.T) {
	a, ra, now := newTestApprovals(t)
	post := func(body string) *httptest.ResponseRecorder {
		ts := strconv.FormatInt(now.Unix(), 10)
		return postApproval(t, a, body, map[string]string{TimestampHeader: ts, SignatureHeader: sign("ci-s3cret", ts, body)})
	}
	for _, body := range []string{
		`{"pipeline":"web","stage":"prod","bundle":"3f9a"}`,
		`{"pipeline":"web","stage":"prod","bundle":"3f9a"}`,
	} {
		if rec := post(body); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"approver":"webhook:circleci"`) {
			t.Fatalf("%s: %d %s", body, rec.Code, rec.Body)
		}
	}
	rec := post(`{"pipeline":"web","stage":"prod","bundle":"3f9a","by":"alice"}`)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"approvers":["webhook:circleci"]`) {
		t.Errorf("a by named a second approver: %d %s", rec.Code, rec.Body)
	}
	for body, want := range map[string]int{
		`{"pipeline":"web","stage":"prod"}`:                                    http.StatusBadRequest, // no bundle
		`{"pipeline":"web","stage":"prod","bundle":"3f9a","by":"eve\nforged"}`: http.StatusBadRequest,
		`{"pipeline":"web","stage":"prod","bundle":"3f9a","user":"alice"}`:     http.StatusBadRequest, // unknown field
		`not json`: http.StatusBadRequest,
		`{"pipeline":"web","stage":"qa","bundle":"3f9a"}`: http.StatusNotFound,
	} {
		if rec := post(body); rec.Code != want {
			t.Errorf("%s: %d, want %d: %s", body, rec.Code, want, rec.Body)
		}
	}
	if diff := cmp.Diff([]string{"webhook:circleci", "webhook:circleci", "webhook:circleci"}, ra.bys); diff != "" {
		t.Errorf("approvals reaching the loop (-want +got):\n%s", diff)
	}
	// A bundle no longer awaiting approval (promoted meanwhile) is a
	// conflict, not an error of fluxd's.
	ra.rec.Status = promotion.Promoted
	if rec := post(`{"pipeline":"web","stage":"prod","bundle":"3f9a","by":"bob"}`); rec.Code != http.StatusConflict {
		t.Errorf("a promoted bundle: %d %s", rec.Code, rec.Body)
	}
}

// Only POST /v1/approve.
func TestApprovalRoute(t *testing.T) {
	a, _, _ := newTestApprovals(t)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, ApprovePath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", rec.Code)
	}
	rec = httptest.NewRecorder()
	a.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader("{}")))
	if rec.Code != http.StatusNotFound {
		t.Errorf("another path: %d", rec.Code)
	}
	if _, err := NewApprovals(&recordingApprover{}, "ci", nil, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("an empty secret was accepted")
	}
	if _, err := NewApprovals(&recordingApprover{}, "c i\n", []byte("x"), slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a key name with a space and a newline was accepted")
	}
}

// review4: the webhook as cmd/fluxd wires it, over the real promotion
// Controller (not a fake returning fluxerr kinds). docs/promotion.md
// says an unknown pipeline, stage or bundle is refused with a 4xx; the
// Controller's refusals are plain errors, so approvalCode answers 500
// "fluxd could not record the approval ... Send it again later": CI
// retries a request that can never succeed, and is not told why.
func TestApprovalRefusalsOfTheRealLoopAre4xx(t *testing.T) {
	ps, probs := promotion.Parse("pipeline.yaml", []byte(`apiVersion: fluxd.io/v1
kind: Pipeline
metadata: {name: web, namespace: team}
spec:
  stages:
  - name: dev
    services: [team-dev:deployment/web]
  - name: staging
    from: dev
    services: [team-staging:deployment/web]
  - name: prod
    from: staging
    services: [team-prod:deployment/web]
    approvals: 1
`))
	if len(probs) > 0 || len(ps) != 1 {
		t.Fatalf("parse: %v", probs)
	}
	c := promotion.New(promotion.Config{}) // refusals below are decided before the store is read
	c.SetPipelines(ps, nil)
	a, err := NewApprovals(c, "ci", []byte("ci-s3cret"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(a.now().Unix(), 10)
	for _, body := range []string{
		`{"pipeline":"nope","stage":"prod","bundle":"3f9a"}`,   // no such pipeline
		`{"pipeline":"web","stage":"qa","bundle":"3f9a"}`,      // no such stage
		`{"pipeline":"web","stage":"staging","bundle":"3f9a"}`, // a stage that asks for no approvals
	} {
		rec := postApproval(t, a, body, map[string]string{TimestampHeader: ts, SignatureHeader: sign("ci-s3cret", ts, body)})
		if rec.Code >= 500 {
			t.Errorf("%s: %d %q, want a 4xx saying what is wrong", body, rec.Code, rec.Body)
		}
	}
}
