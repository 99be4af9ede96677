package webhook

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/registry"
)

// Handler serves POST /v1/notify: registries' push notifications.
// It understands the payloads of Docker Hub, the CNCF distribution
// registry (notifications), Harbor and Quay. It answers 202 as soon as a
// notification is authenticated and parsed; each pushed repository is
// then refreshed in the background (Run), waking the automator as
// NotifyImage does. Notifications of one repository coalesce: while one
// is waiting or being refreshed, more of it cause at most one more
// refresh.
//
// A request is authenticated before its body is read, by the shared
// secret as a bearer token, in the X-Fluxd-Secret header, or in the token
// query parameter (a last resort, for senders that cannot set headers,
// such as Docker Hub: query strings end up in proxies' logs). A signed
// request is authenticated by reading at most 1 MiB of its body:
// X-Hub-Signature-256 is "sha256=" and the hex HMAC-SHA256, under the
// secret, of the body; or, when the sender sets X-Fluxd-Timestamp (Unix
// seconds), of the timestamp, a ".", then the body, and the timestamp
// must be within 5 minutes of fluxd's clock, so that a captured request
// cannot be replayed later. Comparisons take constant time.
type Handler struct {
	// signed is the sender's proof and the limits on reading signed
	// bodies (RequireTimestamp and TrustedProxies are set before
	// serving), shared with the approval webhook (signed.go).
	*signed

	log    *slog.Logger
	leader Leadership
	client *http.Client
	// refresh and watched are the Refresher's RefreshNotified and
	// RefuseUnwatched, held as functions so that a test can stand in
	// for either.
	refresh func(ctx context.Context, image string) error
	watched func(ctx context.Context, repository string) error

	// queue holds the repositories to refresh, each once (queue.go).
	queue Queue

	mu      sync.Mutex
	pending map[string]string // repository → the image last notified, until a worker takes it
	// replicaCAs sign the certificates of followers whose passed-on
	// notifications are taken (RequireReplicaCerts).
	replicaCAs *x509.CertPool
}

// Refresher is what a notification does, the daemon's operations: the
// handler only authenticates, parses and queues.
type Refresher interface {
	// RefuseUnwatched refuses a repository that no service fluxd
	// watches runs, before any request is made for it: a payload's host
	// fields are the sender's to choose.
	RefuseUnwatched(ctx context.Context, repository string) error
	// RefreshNotified refreshes the repository of image and wakes the
	// automator, as fluxctl notify does.
	RefreshNotified(ctx context.Context, image string) error
}

// New returns the handler; secret must not be empty. queue is
// client-go's workqueue in fluxd (workqueue.NewTyped[string]()); Run
// refreshes what it accepts through r.
func New(r Refresher, queue Queue, secret []byte, log *slog.Logger) (*Handler, error) {
	if len(secret) == 0 {
		return nil, errors.New("the webhook secret is empty")
	}
	return &Handler{signed: newSigned(secret), log: log.With("component", "webhook"),
		refresh: r.RefreshNotified, watched: r.RefuseUnwatched,
		queue: queue, pending: map[string]string{}}, nil
}

// maxPayload is the largest body read.
const maxPayload = 1 << 20

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/notify" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	// A notification a follower passed on comes from a replica, with its
	// certificate: the mark alone is anyone's to write.
	if r.Header.Get(ForwardedHeader) != "" && !h.forwardedByReplica(r) {
		h.log.Warn("webhook refused: marked as passed on by a replica, without a replica certificate", "remote", r.RemoteAddr)
		http.Error(w, errNotAReplica.Error(), http.StatusUnauthorized)
		return
	}
	// Nothing of the body is read before the sender is known, except the
	// bounded body of a signed request, which the signature covers.
	bySecret := h.hasSecret(r)
	if !bySecret && !h.signedInWindow(r) {
		h.log.Info("webhook refused: no valid secret or signature", "remote", r.RemoteAddr)
		http.Error(w, "no valid secret or signature: send the shared secret as a bearer token or X-Fluxd-Secret (or ?token=), or sign the body (X-Hub-Signature-256, optionally with X-Fluxd-Timestamp)", http.StatusUnauthorized)
		return
	}
	if r.ContentLength > maxPayload {
		http.Error(w, "the payload is larger than 1 MiB", http.StatusRequestEntityTooLarge)
		return
	}
	if !bySecret {
		// A signed body is read before the sender is known: only a few at
		// a time, so that anyone can make fluxd hold at most
		// maxSignedReads MiB.
		_, release, ok := h.admitRead(w, r, "notifications")
		if !ok {
			return
		}
		defer release()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPayload))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "the payload is larger than 1 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "the payload could not be read", http.StatusBadRequest)
		return
	}
	if !bySecret {
		if !h.validSignature(r, body) {
			h.log.Info("webhook refused: the signature does not match", "remote", r.RemoteAddr)
			http.Error(w, "the signature does not match the body (X-Hub-Signature-256: sha256=HMAC-SHA256 of the body, or of TIMESTAMP.BODY with X-Fluxd-Timestamp)", http.StatusUnauthorized)
			return
		}
		h.signers.Saw(h.TrustedProxies.Key(r), h.now())
	}
	if h.leader != nil && !h.leader.IsLeader() {
		h.forward(w, r, body)
		return
	}
	images, source, err := parseNotification(body)
	if errors.Is(err, errNoPushEvents) {
		// The distribution registry notifies every event, pulls too (fluxd's
		// own reads and every kubelet's among them), and sends an envelope
		// again until it is answered 2xx: a 400 would stall its one queue
		// for this endpoint, the pushes behind it included, for good.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_ = json.NewEncoder(w).Encode(map[string]any{"source": "distribution", "ignored": "no push events"})
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	type result struct {
		Image      string `json:"image"`
		Repository string `json:"repository,omitempty"`
		Queued     bool   `json:"queued,omitempty"`
		Error      string `json:"error,omitempty"`
	}
	var out []result
	queued := map[string]bool{}
	for _, img := range images {
		ref, err := registry.ParseRef(img)
		if err != nil {
			out = append(out, result{Image: img, Error: err.Error()})
			continue
		}
		// One refresh per repository, however many of its tags were pushed.
		if queued[ref.Repository] {
			continue
		}
		// Only repositories a watched service runs: the payload's host
		// fields are the sender's to choose.
		if err := h.watched(r.Context(), ref.Repository); err != nil {
			out = append(out, result{Image: img, Error: fluxerr.FirstLine(err)})
			continue
		}
		if len(queued) == maxPayloadRepositories {
			out = append(out, result{Image: img, Error: fmt.Sprintf("more than %d repositories in one notification: the rest is ignored", maxPayloadRepositories)})
			break
		}
		if !h.enqueue(ref.Repository, img) {
			h.log.Warn("webhook refused: too many repositories wait for a refresh", "pending", maxPending)
			http.Error(w, fmt.Sprintf("fluxd has %d repositories waiting for a refresh already; send the notification again later", maxPending), http.StatusServiceUnavailable)
			return
		}
		queued[ref.Repository] = true
		out = append(out, result{Image: img, Repository: ref.Repository, Queued: true})
	}
	code := http.StatusAccepted
	if len(queued) == 0 {
		code = http.StatusBadRequest
	}
	h.log.Info("webhook accepted", "source", source, "images", images)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"source": source, "results": out})
}
