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
	after := h.last("team-a") - 10
	b.ReportAllocs()
	for b.Loop() {
		if evs, ok, _ := h.since("team-a", after); !ok || len(evs) != 10 {
			b.Fatal(len(evs), ok)
		}
	}
}

// BenchmarkHubPublishJobOf1000Services measures a job update of a release
// of 1,000 services as the page gets it: no plan, only the workload whose
// progress changed. event-bytes is one event's size; kept-bytes what the
// ring holds at the end.
func BenchmarkHubPublishJobOf1000Services(b *testing.B) {
	h := NewHub(0)
	u := bigJob(1000, 0)
	h.PublishJob("a", u)
	b.ReportAllocs()
	i := int32(0)
	for b.Loop() {
		i++
		u.Workloads[0].Replicas.Ready = 1 + i%3
		h.PublishJob("a", u)
	}
	b.ReportMetric(float64(len(h.rings["a"].events[len(h.rings["a"].events)-1].Data)), "event-bytes")
	b.ReportMetric(float64(h.rings["a"].bytes), "kept-bytes")
}
