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

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// Event is one live event for the page.
type Event struct {
	// ID orders events; with the hub's epoch it is the SSE event ID.
	ID uint64
	// Instance is the instance the event belongs to; "" is for every
	// signed-in caller (a registry push notification).
	Instance string
	// Type is the SSE event name: "job", "log", "notify", "automation"
	// or "promotion".
	Type string
	Data []byte
	// Audience, when set, says which callers an event for everyone ("")
	// is for: those whose instance's scope holds what it is about.
	Audience func(auth.Identity) bool
}

// Hub keeps the most recent events, so that a page that lost its
// connection gets what it missed (Last-Event-ID), and wakes the pages'
// streams when one comes. Each instance has its own ring, numbered from 1
// per process: an instance's pages neither see how busy another instance
// is (its event numbers) nor lose what they missed to another's events.
// An event for everyone ("") goes into every instance's ring. The epoch,
// random per process, tells a page that reconnects to a restarted fluxd
// that its Last-Event-ID means nothing here.
type Hub struct {
	epoch    string
	size     int
	maxBytes int

	mu    sync.Mutex
	rings map[string]*ring
	wake  chan struct{}
	// progress is the last rollout progress sent per running job, so
	// that a job event carries only the workloads whose progress changed.
	progress map[string]map[string][4]int32

	// out, when the hub is fed by the store (UseStore), takes what this
	// replica publishes to the store; nil: published to the rings at
	// once.
	out   chan history.LiveEvent
	store LiveStore
	// wrote wakes the reader after this replica wrote.
	wrote chan struct{}
	// dropped counts events not written because the writer was behind.
	dropped int64
}

// ring is one instance's recent events.
type ring struct {
	events []Event
	bytes  int // of the kept events' data
	next   uint64
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
	return &Hub{epoch: hex.EncodeToString(b[:]), size: size, maxBytes: DefaultHubBytes, rings: map[string]*ring{}, wake: make(chan struct{}),
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
		QueuePosition: j.QueuePosition, Commit: j.Commit, User: j.User, Type: j.Type}
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
	h.publish(instance, typ, m, nil)
}

// PublishTo adds an event of typ for the callers audience accepts, of
// any instance.
func (h *Hub) PublishTo(audience func(auth.Identity) bool, typ string, m proto.Message) {
	h.publish("", typ, m, audience)
}

func (h *Hub) publish(instance, typ string, m proto.Message, audience func(auth.Identity) bool) {
	data, err := marshal.Marshal(m)
	if err != nil {
		return
	}
	if h.out != nil && audience == nil {
		// Fed by the store: the event reaches this hub's rings (and
		// every other replica's) from there. An event for an audience
		// (a scoped notification) is not: the store carries no
		// audience, so it stays on this replica, where it is checked.
		h.send(instance, typ, data)
		return
	}
	h.deliver(instance, typ, data, audience)
}

// deliver adds an event to the rings and wakes the streams; audience, if
// set, picks the callers that see it.
func (h *Hub) deliver(instance, typ string, data []byte, audience func(auth.Identity) bool) {
	h.mu.Lock()
	if instance == "" {
		for _, r := range h.rings {
			h.add(r, Event{Instance: instance, Type: typ, Data: data, Audience: audience})
		}
	} else {
		h.add(h.ring(instance), Event{Instance: instance, Type: typ, Data: data})
	}
	close(h.wake)
	h.wake = make(chan struct{})
	h.mu.Unlock()
}

// ring returns instance's ring, made when missing. h.mu is held.
func (h *Hub) ring(instance string) *ring {
	r := h.rings[instance]
	if r == nil {
		r = &ring{next: 1}
		h.rings[instance] = r
	}
	return r
}

// add appends ev to r and drops the oldest events beyond size or
// maxBytes (the newest one is always kept). Dropped entries are cleared,
// so their data is freed even while the backing array lives on; append
// copies only the kept ones when it grows the array. h.mu is held.
func (h *Hub) add(r *ring, ev Event) {
	ev.ID = r.next
	r.next++
	r.events = append(r.events, ev)
	r.bytes += len(ev.Data)
	drop := 0
	for len(r.events)-drop > 1 && (len(r.events)-drop > h.size || r.bytes > h.maxBytes) {
		r.bytes -= len(r.events[drop].Data)
		r.events[drop] = Event{}
		drop++
	}
	r.events = r.events[drop:]
}

// since returns instance's events after after, whether they are all
// still kept (false: some were dropped, the page must reload), and a
// channel closed when the next event comes.
func (h *Hub) since(instance string, after uint64) ([]Event, bool, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.ring(instance)
	first := r.next
	if len(r.events) > 0 {
		first = r.events[0].ID
	}
	if after >= r.next || after+1 < first {
		return nil, false, h.wake
	}
	i := len(r.events) - int(r.next-1-after)
	return append([]Event(nil), r.events[i:]...), true, h.wake
}

// last is instance's newest event's number (0 when none).
func (h *Hub) last(instance string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ring(instance).next - 1
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
