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
	epoch string
	size  int

	mu     sync.Mutex
	events []Event
	next   uint64
	wake   chan struct{}
}

// NewHub returns a Hub that keeps the last size events (default 4096).
func NewHub(size int) *Hub {
	if size <= 0 {
		size = 4096
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &Hub{epoch: hex.EncodeToString(b[:]), size: size, next: 1, wake: make(chan struct{})}
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
	h.next++
	if len(h.events) >= 2*h.size {
		h.events = append([]Event(nil), h.events[len(h.events)-h.size:]...)
	}
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
