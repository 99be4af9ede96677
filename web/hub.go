package web

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// Event is one live event for the page.
type Event struct {
	// ID orders events; with the hub's epoch it is the SSE event ID.
	ID uint64
	// Instance is the instance the event belongs to; "" is for every
	// signed-in caller (a registry push notification).
	Instance string
	// Type is the SSE event name: "job", "log", "notify" or "automation".
	Type string
	Data []byte
}

// Hub keeps the most recent events, so that a page that lost its
// connection gets what it missed (Last-Event-ID), and wakes the pages'
// streams when one comes. Events are numbered from 1 per process; the
// epoch, random per process, tells a page that reconnects to a restarted
// fluxd that its Last-Event-ID means nothing here.
type Hub struct {
	epoch    string
	size     int
	maxBytes int

	mu     sync.Mutex
	events []Event
	bytes  int // of the kept events' data
	next   uint64
	wake   chan struct{}
	// progress is the last rollout progress sent per running job, so
	// that a job event carries only the workloads whose progress changed.
	progress map[string]map[string][4]int32
}

// DefaultHubBytes bounds the data of the events a Hub keeps.
const DefaultHubBytes = 8 << 20

// NewHub returns a Hub that keeps the last size events (default 4096),
// and no more than DefaultHubBytes of their data.
func NewHub(size int) *Hub {
	if size <= 0 {
		size = 4096
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &Hub{epoch: hex.EncodeToString(b[:]), size: size, maxBytes: DefaultHubBytes, next: 1, wake: make(chan struct{}),
		progress: map[string]map[string][4]int32{}}
}

// WithMaxBytes bounds the kept events' data to n bytes instead.
func (h *Hub) WithMaxBytes(n int) *Hub {
	h.maxBytes = n
	return h
}

// PublishJob publishes a job update as a "job" event that is small
// whatever the job's size: the job without its plan (the page reads it
// once, with GetJob) and only the workloads whose progress changed since
// the job's previous event.
func (h *Hub) PublishJob(instance string, u *fluxdv1.WatchJobResponse) {
	if u.GetJob() == nil {
		return
	}
	// Every field but the plan (a clone would copy the plan first).
	j := u.Job
	job := &fluxdv1.Job{Id: j.Id, State: j.State, Stage: j.Stage, Error: j.Error, CreatedAt: j.CreatedAt, FinishedAt: j.FinishedAt,
		QueuePosition: j.QueuePosition, Commit: j.Commit}
	ev := &fluxdv1.WatchJobResponse{Job: job}
	h.mu.Lock()
	last := h.progress[job.Id]
	if last == nil {
		last = map[string][4]int32{}
		h.progress[job.Id] = last
	}
	for _, w := range u.Workloads {
		r := w.GetReplicas()
		k := [4]int32{r.GetDesired(), r.GetUpdated(), r.GetReady(), r.GetAvailable()}
		if old, ok := last[w.Service]; ok && old == k {
			continue
		}
		last[w.Service] = k
		ev.Workloads = append(ev.Workloads, w)
	}
	switch job.State {
	case fluxdv1.JobState_JOB_STATE_SUCCEEDED, fluxdv1.JobState_JOB_STATE_FAILED, fluxdv1.JobState_JOB_STATE_CANCELLED:
		delete(h.progress, job.Id)
	}
	h.mu.Unlock()
	h.Publish(instance, "job", ev)
}

// marshal is the JSON the JSON API answers with, so that an event and a
// call's answer read the same.
var marshal = protojson.MarshalOptions{EmitUnpopulated: true}

// Publish adds an event of typ for instance ("" for everyone).
func (h *Hub) Publish(instance, typ string, m proto.Message) {
	data, err := marshal.Marshal(m)
	if err != nil {
		return
	}
	h.mu.Lock()
	h.events = append(h.events, Event{ID: h.next, Instance: instance, Type: typ, Data: data})
	h.bytes += len(data)
	h.next++
	// Drop the oldest events beyond size or maxBytes (the newest one is
	// always kept). Dropped entries are cleared, so their data is freed
	// even while the backing array lives on; append copies only the kept
	// ones when it grows the array.
	drop := 0
	for len(h.events)-drop > 1 && (len(h.events)-drop > h.size || h.bytes > h.maxBytes) {
		h.bytes -= len(h.events[drop].Data)
		h.events[drop] = Event{}
		drop++
	}
	h.events = h.events[drop:]
	close(h.wake)
	h.wake = make(chan struct{})
	h.mu.Unlock()
}

// since returns the events after after, whether they are all still kept
// (false: some were dropped, the page must reload), and a channel closed
// when the next event comes.
func (h *Hub) since(after uint64) ([]Event, bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	first := h.next
	if len(h.events) > 0 {
		first = h.events[0].ID
	}
	if after >= h.next || after+1 < first {
		return nil, false, h.wake
	}
	i := len(h.events) - int(h.next-1-after)
	return append([]Event(nil), h.events[i:]...), true, h.wake
}

// last is the newest event's number (0 when none).
func (h *Hub) last() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.next - 1
}

// eventID is the SSE id of event n.
func (h *Hub) eventID(n uint64) string { return h.epoch + "-" + strconv.FormatUint(n, 10) }

// parseID reads a Last-Event-ID; false when it is not one of this
// process's.
func (h *Hub) parseID(s string) (uint64, bool) {
	epoch, n, ok := strings.Cut(s, "-")
	if !ok || epoch != h.epoch {
		return 0, false
	}
	v, err := strconv.ParseUint(n, 10, 64)
	return v, err == nil
}

func (e Event) String() string { return fmt.Sprintf("%d %s %s", e.ID, e.Type, e.Instance) }
