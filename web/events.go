package web

import (
	"fmt"
	"net/http"
	"time"
)

// keepAlive is how often an idle event stream sends a comment (and the
// caller's token is checked again).
var keepAlive = 15 * time.Second

// reauthEvery is how often, at most, a stream with events to send checks
// the caller's token again: the events' audiences are judged by the
// caller's identity as the tokens file says it now (a scope narrowed, a
// token revoked), not as it was when the stream opened.
const reauthEvery = time.Second

// events streams live events as Server-Sent Events: the caller's
// instance's jobs (state, stage, rollout progress), their log lines,
// registry push notifications, automator passes (an empty event: the
// page reads its services again) and changes of a bundle's state in a
// stage (an empty "promotion" event: the page reads the stages again). A page that reconnects with Last-Event-ID
// gets what it missed; when that is no longer kept (or fluxd restarted)
// it gets a "reset" event and reloads what it shows.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	c, code, err := h.authenticate(r)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	hub := h.cfg.Hub
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("lastEventId")
	}
	after, ok := hub.parseID(last)
	send := func(format string, args ...any) error {
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		_, err := fmt.Fprintf(w, format, args...)
		return err
	}
	switch {
	case last == "":
		after = hub.last(c.id.Instance)
		err = send("retry: 2000\nid: %s\nevent: hello\ndata: {}\n\n", hub.eventID(after))
	case !ok:
		after = hub.last(c.id.Instance)
		err = send("retry: 2000\nid: %s\nevent: reset\ndata: {}\n\n", hub.eventID(after))
	default:
		err = send("retry: 2000\n\n")
	}
	if err != nil || rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	// reauth checks the caller again, and judges the events that follow
	// by what the tokens file says of it now; false: the stream ended.
	checked := time.Now()
	reauth := func() bool {
		nc, _, err := h.authenticate(r)
		if err != nil || nc.id.Instance != c.id.Instance {
			_ = send("event: signedout\ndata: {}\n\n")
			_ = rc.Flush()
			return false
		}
		c, checked = nc, time.Now()
		return true
	}
	for {
		evs, ok, wake := hub.since(c.id.Instance, after)
		if !ok {
			after = hub.last(c.id.Instance)
			if send("id: %s\nevent: reset\ndata: {}\n\n", hub.eventID(after)) != nil {
				return
			}
		}
		for _, ev := range evs {
			after = ev.ID
			if ev.Instance != "" && ev.Instance != c.id.Instance || ev.Audience != nil && !ev.Audience(c.id) {
				continue
			}
			if send("id: %s\nevent: %s\ndata: %s\n\n", hub.eventID(ev.ID), ev.Type, ev.Data) != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-wake:
			if time.Since(checked) < reauthEvery {
				break
			}
			if !reauth() {
				return
			}
		case <-tick.C:
			if !reauth() {
				return
			}
			if send(": keep-alive\n\n") != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
