package web

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// bigJob is a job update as a release of n services makes it: the plan
// has one item per service, and so does the rollout progress.
func bigJob(n int, ready int32) *fluxdv1.WatchJobResponse {
	u := &fluxdv1.WatchJobResponse{Job: &fluxdv1.Job{Id: "job-1", State: fluxdv1.JobState_JOB_STATE_RUNNING, Stage: "rolling out", Plan: &fluxdv1.Plan{}}}
	for i := 0; i < n; i++ {
		svc := "team:deployment/service-" + strings.Repeat("x", 20) + string(rune('a'+i%26)) + "-" + strings.Repeat("y", i%7)
		u.Job.Plan.Items = append(u.Job.Plan.Items, &fluxdv1.PlanItem{Service: svc, Action: "update", Reason: strings.Repeat("because ", 30)})
		r := int32(0)
		if i == 0 {
			r = ready
		}
		u.Workloads = append(u.Workloads, &fluxdv1.WorkloadProgress{Service: svc + string(rune(i)), Replicas: &fluxdv1.ReplicaCounts{Desired: 3, Ready: r}})
	}
	return u
}

// A job event carries neither the plan nor the progress that did not
// change, and the ring's memory stays bounded by bytes however large the
// events are.
func TestHubMemoryStaysBoundedWithLargeEvents(t *testing.T) {
	t.Parallel()
	h := NewHub(8192).WithMaxBytes(1 << 20)
	h.PublishJob("a", bigJob(1000, 0))
	evs, _, _ := h.since("a", 0)
	var first fluxdv1.WatchJobResponse
	if err := unmarshalEvent(evs[0].Data, &first); err != nil {
		t.Fatal(err)
	}
	if first.Job.Plan != nil {
		t.Error("a job event carries the job's plan; the page reads it once with GetJob")
	}
	if len(first.Workloads) != 1000 {
		t.Errorf("the first event of a job has %d workloads; want all 1000", len(first.Workloads))
	}
	h.PublishJob("a", bigJob(1000, 2))
	evs, _, _ = h.since("a", 1)
	var second fluxdv1.WatchJobResponse
	if err := unmarshalEvent(evs[0].Data, &second); err != nil {
		t.Fatal(err)
	}
	if len(second.Workloads) != 1 || second.Workloads[0].Replicas.Ready != 2 {
		t.Errorf("the next event has workloads %v; want only the one whose progress changed", second.Workloads)
	}
	// Large events of any other kind: the ring keeps no more than its
	// bytes, whatever its count.
	huge := &fluxdv1.Job{Id: "j", Error: strings.Repeat("e", 300<<10)}
	for i := 0; i < 200; i++ {
		h.Publish("a", "job", huge)
	}
	if h.rings["a"].bytes > 1<<20 {
		t.Errorf("the hub keeps %d bytes of events; want at most %d", h.rings["a"].bytes, 1<<20)
	}
	kept := 0
	for _, e := range h.rings["a"].events {
		kept += len(e.Data)
	}
	if kept != h.rings["a"].bytes || len(h.rings["a"].events) > 4 {
		t.Errorf("the hub keeps %d events, %d bytes (counted %d); want at most 4 of 300 KB", len(h.rings["a"].events), kept, h.rings["a"].bytes)
	}
	if _, ok, _ := h.since("a", 1); ok {
		t.Error("since(an event dropped for its bytes) is ok; want a reset")
	}
}

func unmarshalEvent(b []byte, m *fluxdv1.WatchJobResponse) error {
	return protojson.Unmarshal(b, m)
}

// The job in an event is the job but its plan: no field is lost.
func TestHubJobEventKeepsEveryFieldButThePlan(t *testing.T) {
	t.Parallel()
	j := &fluxdv1.Job{Id: "j", State: fluxdv1.JobState_JOB_STATE_FAILED, Stage: "failed", Error: "e", CreatedAt: timestamppb.Now(),
		FinishedAt: timestamppb.Now(), QueuePosition: 2, Plan: &fluxdv1.Plan{Checksum: "c"}, Commit: "abc", User: "u", Type: "release"}
	if n := j.ProtoReflect().Descriptor().Fields().Len(); n != 11 {
		t.Fatalf("Job has %d fields now; PublishJob copies 10 (all but the plan): copy the new ones too, then fix this count", n)
	}
	h := NewHub(4)
	h.PublishJob("a", &fluxdv1.WatchJobResponse{Job: j})
	evs, _, _ := h.since("a", 0)
	var got fluxdv1.WatchJobResponse
	if err := unmarshalEvent(evs[0].Data, &got); err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(j).(*fluxdv1.Job)
	want.Plan = nil
	if !proto.Equal(got.Job, want) {
		t.Errorf("event job %v; want %v", got.Job, want)
	}
}

// Each instance has its own ring and numbers: another instance's events
// neither show in its numbers nor push out what it missed; an event for
// everyone reaches every instance.
func TestHubRingPerInstance(t *testing.T) {
	t.Parallel()
	h := NewHub(2)
	h.last("a")
	h.last("b")
	h.Publish("b", "log", &fluxdv1.JobLogLine{JobId: "x"})
	for i := 0; i < 10; i++ {
		h.Publish("a", "log", &fluxdv1.JobLogLine{JobId: "y"})
	}
	if n := h.last("b"); n != 1 {
		t.Errorf("instance b's last event is number %d after a's 10; want 1", n)
	}
	if evs, ok, _ := h.since("b", 0); !ok || len(evs) != 1 {
		t.Errorf("instance b's event was pushed out by a's: %v %v", evs, ok)
	}
	h.Publish("", "notify", &fluxdv1.ImageNotification{Repository: "r"})
	for _, inst := range []string{"a", "b"} {
		evs, _, _ := h.since(inst, h.last(inst)-1)
		if len(evs) != 1 || evs[0].Type != "notify" {
			t.Errorf("instance %s did not get the event for everyone: %v", inst, evs)
		}
	}
}

func TestHubKeepsTheLastEventsInOrder(t *testing.T) {
	t.Parallel()
	h := NewHub(3)
	for i := 0; i < 4; i++ {
		h.Publish("a", "job", &fluxdv1.Job{Id: string(rune('0' + i))})
	}
	evs, ok, _ := h.since("a", 2)
	if !ok || len(evs) != 2 || evs[0].ID != 3 || evs[1].ID != 4 {
		t.Errorf("since(2) = %v, %v; want events 3 and 4", evs, ok)
	}
	if evs, ok, _ := h.since("a", 4); !ok || len(evs) != 0 {
		t.Errorf("since(last) = %v, %v; want none, ok", evs, ok)
	}
	if _, ok, _ := h.since("a", 9); ok {
		t.Error("since(a number not given yet) is ok")
	}
	for i := 0; i < 4; i++ {
		h.Publish("a", "job", &fluxdv1.Job{})
	}
	if _, ok, _ := h.since("a", 1); ok {
		t.Error("since(an event no longer kept) is ok; want a reset")
	}
}
