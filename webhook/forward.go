package webhook

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"time"

	"github.com/fluxd/fluxd/internal/replicacert"
)

// Leadership says whether this replica leads, and where the leader's
// webhook listener is.
type Leadership interface {
	IsLeader() bool
	LeaderWebhookAddr() string
}

// ForwardedHeader marks a notification a follower passed on.
const ForwardedHeader = "X-Fluxd-Forwarded"

// errNotAReplica refuses a notification marked as passed on that no
// replica certificate vouches for.
var errNotAReplica = replicacert.ErrNotAReplica

// FollowLeader makes a follower pass authenticated notifications on to the
// leader's webhook listener, since only the leader's automator can act on
// them (the refresh alone would only warm the shared cache). A passed-on
// notification carries the shared secret, so it goes only over TLS to a
// leader whose certificate peer verifies; with peer nil, notifications are
// not passed on: the follower refreshes the repository itself, and the
// leader sees the new image at its next check.
func (h *Handler) FollowLeader(l Leadership, peer *tls.Config) {
	if peer == nil {
		h.log.Warn("webhooks that reach this follower are not passed on to the leader without replica TLS (--replica-ca-file): the leader sees their images at its next check")
		return
	}
	h.leader = l
	h.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: peer.Clone(), ForceAttemptHTTP2: false},
		// The request carries the shared secret: never to another address.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// RequireReplicaCerts sets the CAs that sign the replicas' certificates,
// for notifications a follower passes on (X-Fluxd-Forwarded), as the gRPC
// server's RequireReplicaCerts does for calls. Set before serving.
func (h *Handler) RequireReplicaCerts(cas *x509.CertPool) { h.replicaCAs = cas }

// forwardedByReplica says whether a notification marked as passed on
// comes with a replica certificate.
func (h *Handler) forwardedByReplica(r *http.Request) bool {
	if r.TLS == nil {
		return false
	}
	return replicacert.Signed(h.replicaCAs, r.TLS.PeerCertificates)
}

// forward passes a notification to the leader, with the shared secret.
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	addr := h.leader.LeaderWebhookAddr()
	if addr == "" || r.Header.Get(ForwardedHeader) != "" {
		http.Error(w, "no fluxd replica leads just now (an election is under way); send the notification again in a few seconds", http.StatusServiceUnavailable)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "https://"+addr+"/v1/notify", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
	req.Header.Set("X-Fluxd-Secret", string(h.secret))
	req.Header.Set(ForwardedHeader, "1")
	resp, err := h.client.Do(req)
	if err != nil {
		h.log.Warn("cannot pass a notification on to the leader", "leader", addr, "error", err)
		http.Error(w, "this fluxd follows another replica, and the leader cannot be reached; send the notification again", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, io.LimitReader(resp.Body, maxPayload))
}
