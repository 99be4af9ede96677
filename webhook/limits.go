package webhook

import (
	"net/http"
	"time"
)

// maxSignedReads is how many signed bodies (read before the signature is
// checked) may be read at once; maxSignedReadsPerAddr of them from one
// sender (an IPv4 address, an IPv6 /64). keptSignedReads of them are kept
// for senders that signed validly within signerMemory (at most maxSigners
// of those are remembered, the least recent forgotten first): senders
// fluxd does not know can hold only the rest.
const (
	maxSignedReads        = 32
	maxSignedReadsPerAddr = 2
	keptSignedReads       = 8
	signerMemory          = 24 * time.Hour
	maxSigners            = 1000
)

// signedReadTimeout bounds the read of a signed body.
const signedReadTimeout = 5 * time.Second

// Why takeRead refused a signed read.
const (
	readTaken     = iota
	readsOfSender // sender has maxSignedReadsPerAddr under way
	readsOfAll    // every slot open to sender is taken
)

// takeRead counts a signed read from sender, unless sender has
// maxSignedReadsPerAddr under way or every slot open to it is taken
// (keptSignedReads of them only for senders that signed validly lately).
func (h *signed) takeRead(sender string) int {
	h.readsMu.Lock()
	defer h.readsMu.Unlock()
	if h.readsFrom[sender] >= maxSignedReadsPerAddr {
		return readsOfSender
	}
	open := maxSignedReads - keptSignedReads
	if h.signers.Seen(sender, h.now()) {
		open = maxSignedReads
	}
	if h.signedReads >= open {
		return readsOfAll
	}
	h.signedReads++
	h.readsFrom[sender]++
	return readTaken
}

// releaseRead ends a read takeRead counted.
func (h *signed) releaseRead(sender string) {
	h.readsMu.Lock()
	defer h.readsMu.Unlock()
	h.signedReads--
	if h.readsFrom[sender]--; h.readsFrom[sender] <= 0 {
		delete(h.readsFrom, sender)
	}
}

// admitRead takes a signed read's slot for r's sender, answering a
// refusal itself (what names the requests in it: "notifications",
// "requests"), and gives the body signedReadTimeout to arrive: a sender
// trickling its body must not hold a slot for the server's whole read
// timeout. When ok, release must be called once the body is read;
// sender is who the read was counted against.
func (h *signed) admitRead(w http.ResponseWriter, r *http.Request, what string) (sender string, release func(), ok bool) {
	sender = h.TrustedProxies.Key(r)
	switch h.takeRead(sender) {
	case readsOfSender:
		http.Error(w, "too many signed "+what+" from your address are being read; send it again shortly", http.StatusTooManyRequests)
		return sender, nil, false
	case readsOfAll:
		http.Error(w, "too many signed "+what+" are being read; send it again shortly", http.StatusServiceUnavailable)
		return sender, nil, false
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(signedReadTimeout))
	return sender, func() { h.releaseRead(sender) }, true
}
