package promotion

import (
	"context"
	"strings"
	"testing"
)

// A person of another instance (tenant) promoting the bundle fluxd is
// already moving into a stage is handed the automatic job, kept under
// instance "default": fluxctl then follows a job ID its instance cannot
// read (GetJob/WatchJob are per instance), and learns of another
// instance's job.
func TestPromoteUnderWayAnswersOnlyTheCallersInstance(t *testing.T) {
	h := newHarness(t, testPipeline)
	b1 := h.releaseDev("1.0.0") // staging: b1 promoted automatically, job queued
	cur, ok := h.stage("staging")
	if !ok || cur.Job == "" {
		t.Fatalf("staging = %+v, want a job in flight", cur)
	}
	u, err := h.c.Promote(context.Background(), "team-b", PromoteRequest{Pipeline: "web", Stage: "staging", Bundle: b1, User: "bob"}, "")
	if err != nil {
		if !strings.Contains(err.Error(), cur.Job) {
			t.Logf("refused: %v", err)
		}
		return
	}
	if u.Job.Instance != "team-b" {
		t.Fatalf("team-b's promote answered job %s of instance %q", u.Job.ID, u.Job.Instance)
	}
}
