package web

import (
	"testing"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// BenchmarkHubPublish measures publishing one job update (marshalled
// once, whatever the number of pages watching) into a full ring.
func BenchmarkHubPublish(b *testing.B) {
	h := NewHub(0)
	u := &fluxdv1.WatchJobResponse{Job: &fluxdv1.Job{Id: "0123456789abcdef", State: fluxdv1.JobState_JOB_STATE_RUNNING, Stage: "rolling out"},
		Workloads: []*fluxdv1.WorkloadProgress{{Service: "default:deployment/web", Replicas: &fluxdv1.ReplicaCounts{Desired: 3, Updated: 2, Ready: 1}}}}
	b.ReportAllocs()
	for b.Loop() {
		h.Publish("team-a", "job", u)
	}
}

// BenchmarkHubSince measures what each page's stream does per wake-up:
// read the events after its last one (here, the last 10).
func BenchmarkHubSince(b *testing.B) {
	h := NewHub(0)
	for i := 0; i < 5000; i++ {
		h.Publish("team-a", "log", &fluxdv1.JobLogLine{JobId: "j", Seq: int64(i), Text: "default:deployment/web: 2/3 updated, 1 ready, 1 available"})
	}
	after := h.last() - 10
	b.ReportAllocs()
	for b.Loop() {
		if evs, ok, _ := h.since(after); !ok || len(evs) != 10 {
			b.Fatal(len(evs), ok)
		}
	}
}
