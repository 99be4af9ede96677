package webhook

import (
	"log/slog"
	"strconv"
	"testing"

	"github.com/fluxd/fluxd/promotion"
)

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
