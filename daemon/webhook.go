package daemon

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/clientkey"
	"github.com/fluxd/fluxd/registry"
)

// WebhookHandler serves POST /v1/notify: registries' push notifications.
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
type WebhookHandler struct {
	// RequireTimestamp refuses signed notifications without a signed
	// X-Fluxd-Timestamp, which could be replayed forever. Set before
	// serving.
	RequireTimestamp bool
	// TrustedProxies are the proxies in front of the listener (an
	// Ingress: registries must reach it) whose X-Forwarded-For names the
	// sender, for the per-sender share of signed reads (--trusted-proxies).
	// Empty: the connection's address. Set before serving.
	TrustedProxies clientkey.Proxies

	d      *Daemon
	secret []byte
	log    *slog.Logger
	leader WebhookLeadership
	client *http.Client
	// now is the clock for signed timestamps.
	now func() time.Time
	// refresh refreshes the repository of image and wakes the automator.
	refresh func(ctx context.Context, image string) error
	// watched refuses a repository no watched service runs (Daemon's).
	watched func(ctx context.Context, repository string) error

	mu       sync.Mutex
	pending  map[string]string // repository → the image last notified
	queue    []string          // pending repositories not in flight, in order
	inFlight map[string]bool
	wake     chan struct{}
	// replicaCAs sign the certificates of followers whose passed-on
	// notifications are taken (RequireReplicaCerts).
	replicaCAs *x509.CertPool
	// signedReads counts the signed bodies being read (under mu), and
	// readsFrom counts them by sender (clientkey), so that one sender
	// cannot take every slot from genuine ones. signers are the senders
	// whose signature was valid lately: they may use the slots kept for
	// them, which a flood of unknown senders cannot take.
	signedReads int
	readsFrom   map[string]int
	signers     *clientkey.Recent
}

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

// WebhookLeadership says whether this replica leads, and where the
// leader's webhook listener is.
type WebhookLeadership interface {
	IsLeader() bool
	LeaderWebhookAddr() string
}

// forwardedWebhook marks a notification a follower passed on.
const forwardedWebhook = "X-Fluxd-Forwarded"

// FollowLeader makes a follower pass authenticated notifications on to the
// leader's webhook listener, since only the leader's automator can act on
// them (the refresh alone would only warm the shared cache). A passed-on
// notification carries the shared secret, so it goes only over TLS to a
// leader whose certificate peer verifies; with peer nil, notifications are
// not passed on: the follower refreshes the repository itself, and the
// leader sees the new image at its next check.
func (h *WebhookHandler) FollowLeader(l WebhookLeadership, peer *tls.Config) {
	if peer == nil {
		h.log.Warn("webhooks that reach this follower are not passed on to the leader without replica TLS (--replica-ca-file): the leader sees their images at its next check")
		return
	}
	h.leader = l
	h.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: peer.Clone(), ForceAttemptHTTP2: false},
		// The request carries the shared secret: never to another address.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// forward passes a notification to the leader, with the shared secret.
func (h *WebhookHandler) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	addr := h.leader.LeaderWebhookAddr()
	if addr == "" || r.Header.Get(forwardedWebhook) != "" {
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
	req.Header.Set(forwardedWebhook, "1")
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

// NewWebhookHandler returns the handler; secret must not be empty. Run
// refreshes what it accepts.
func NewWebhookHandler(d *Daemon, secret []byte, log *slog.Logger) (*WebhookHandler, error) {
	if len(secret) == 0 {
		return nil, errors.New("the webhook secret is empty")
	}
	h := &WebhookHandler{d: d, secret: secret, log: log.With("component", "webhook"), now: time.Now,
		pending: map[string]string{}, inFlight: map[string]bool{}, wake: make(chan struct{}, 1),
		readsFrom: map[string]int{}, signers: clientkey.NewRecent(maxSigners, signerMemory)}
	h.watched = d.watched
	h.refresh = func(ctx context.Context, image string) error {
		_, _, err := d.Notify(ctx, webhookIdentity, image)
		return err
	}
	return h, nil
}

// webhookIdentity is who a notification acts as: it only refreshes
// shared registry data, never anything of an instance.
var webhookIdentity = auth.Identity{Instance: "webhook", Role: auth.Deployer}

const (
	maxPayload = 1 << 20
	// signatureWindow is how far a signed timestamp may be from now.
	signatureWindow = 5 * time.Minute
	// webhookWorkers refresh that many repositories at once.
	webhookWorkers = 4
	// webhookRefreshTimeout bounds one repository's refresh.
	webhookRefreshTimeout = 10 * time.Minute
)

// Timestamp and signature headers of signed notifications.
const (
	TimestampHeader = "X-Fluxd-Timestamp"
	SignatureHeader = "X-Hub-Signature-256"
)

func (h *WebhookHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
	if r.Header.Get(forwardedWebhook) != "" && !h.forwardedByReplica(r) {
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
		sender := h.TrustedProxies.Key(r)
		switch h.takeRead(sender) {
		case readsOfSender:
			http.Error(w, "too many signed notifications from your address are being read; send it again shortly", http.StatusTooManyRequests)
			return
		case readsOfAll:
			http.Error(w, "too many signed notifications are being read; send it again shortly", http.StatusServiceUnavailable)
			return
		}
		defer h.releaseRead(sender)
		// And quickly: a sender trickling its body must not hold a slot
		// for the server's whole read timeout.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(signedReadTimeout))
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
			out = append(out, result{Image: img, Error: firstLineOf(err)})
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

// Why takeRead refused a signed read.
const (
	readTaken     = iota
	readsOfSender // sender has maxSignedReadsPerAddr under way
	readsOfAll    // every slot open to sender is taken
)

// takeRead counts a signed read from sender, unless sender has
// maxSignedReadsPerAddr under way or every slot open to it is taken
// (keptSignedReads of them only for senders that signed validly lately).
func (h *WebhookHandler) takeRead(sender string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
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

func (h *WebhookHandler) releaseRead(sender string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.signedReads--
	if h.readsFrom[sender]--; h.readsFrom[sender] <= 0 {
		delete(h.readsFrom, sender)
	}
}

// hasSecret reports whether the request carries the shared secret in a
// header or the query string.
func (h *WebhookHandler) hasSecret(r *http.Request) bool {
	candidates := []string{r.Header.Get("X-Fluxd-Secret"), r.URL.Query().Get("token")}
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "bearer") {
		candidates = append(candidates, strings.TrimSpace(tok))
	}
	for _, c := range candidates {
		if c != "" && subtle.ConstantTimeCompare([]byte(c), h.secret) == 1 {
			return true
		}
	}
	return false
}

// signedInWindow reports whether the request claims a signature worth
// reading the body for: a well-formed one, with a timestamp (if any)
// within the window.
func (h *WebhookHandler) signedInWindow(r *http.Request) bool {
	sig, ok := strings.CutPrefix(r.Header.Get(SignatureHeader), "sha256=")
	if !ok || len(sig) != 2*sha256.Size {
		return false
	}
	if _, err := hex.DecodeString(sig); err != nil {
		return false
	}
	ts := r.Header.Get(TimestampHeader)
	if ts == "" {
		return !h.RequireTimestamp
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	d := h.now().Sub(time.Unix(sec, 0))
	return d <= signatureWindow && d >= -signatureWindow
}

// validSignature checks the HMAC of the body, or of "TIMESTAMP.BODY".
func (h *WebhookHandler) validSignature(r *http.Request, body []byte) bool {
	got, err := hex.DecodeString(strings.TrimPrefix(r.Header.Get(SignatureHeader), "sha256="))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, h.secret)
	if ts := r.Header.Get(TimestampHeader); ts != "" {
		mac.Write([]byte(ts + "."))
	}
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// Bounds on what senders can queue: the repositories are theirs to name,
// so the work they cause is capped.
const (
	// maxPending repositories may wait for a refresh; beyond, a
	// notification is answered 503 (the sender retries later).
	maxPending = 1000
	// maxPayloadRepositories are taken from one notification.
	maxPayloadRepositories = 100
)

// enqueue asks for a refresh of repository. A repository already waiting
// is not queued twice; one being refreshed is refreshed once more after.
// It returns false when maxPending repositories wait already.
func (h *WebhookHandler) enqueue(repository, image string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, waiting := h.pending[repository]; waiting {
		h.pending[repository] = image
		return true
	}
	if len(h.pending) >= maxPending {
		return false
	}
	h.pending[repository] = image
	if !h.inFlight[repository] {
		h.queue = append(h.queue, repository)
		h.poke()
	}
	return true
}

// poke wakes a worker, without waiting.
func (h *WebhookHandler) poke() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Run refreshes the repositories notified, a few at once, until ctx ends.
func (h *WebhookHandler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range webhookWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				for h.work(ctx) {
				}
				select {
				case <-ctx.Done():
					return
				case <-h.wake:
				}
			}
		}()
	}
	wg.Wait()
}

// work refreshes the next waiting repository, and reports whether there
// was one.
func (h *WebhookHandler) work(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	h.mu.Lock()
	if len(h.queue) == 0 {
		h.mu.Unlock()
		return false
	}
	repo := h.queue[0]
	h.queue = h.queue[1:]
	image := h.pending[repo]
	delete(h.pending, repo)
	h.inFlight[repo] = true
	if len(h.queue) > 0 {
		h.poke() // another worker may take the next
	}
	h.mu.Unlock()

	rctx, cancel := context.WithTimeout(ctx, webhookRefreshTimeout)
	err := h.refresh(rctx, image)
	cancel()
	if err != nil && ctx.Err() == nil {
		h.log.Warn("webhook: refreshing a notified repository failed", "repository", repo, "error", err)
	}

	h.mu.Lock()
	delete(h.inFlight, repo)
	if _, again := h.pending[repo]; again {
		h.queue = append(h.queue, repo)
		h.poke()
	}
	h.mu.Unlock()
	return true
}

// errNoPushEvents is a distribution envelope with no push event in it:
// pulls, deletes, mounts. Nothing to refresh, and no error to the sender.
var errNoPushEvents = errors.New("a distribution notification without push events")

// parseNotification finds the pushed images in a registry's payload and
// names the kind of sender.
func parseNotification(body []byte) ([]string, string, error) {
	var p struct {
		// Docker Hub
		PushData *struct {
			Tag string `json:"tag"`
		} `json:"push_data"`
		Repository json.RawMessage `json:"repository"`
		// CNCF distribution
		Events []struct {
			Action string `json:"action"`
			Target struct {
				MediaType  string `json:"mediaType"`
				Repository string `json:"repository"`
				Tag        string `json:"tag"`
			} `json:"target"`
			Request struct {
				Host string `json:"host"`
			} `json:"request"`
		} `json:"events"`
		// Harbor
		Type      string `json:"type"`
		EventData *struct {
			Resources []struct {
				ResourceURL string `json:"resource_url"`
			} `json:"resources"`
		} `json:"event_data"`
		// Quay
		DockerURL   string   `json:"docker_url"`
		UpdatedTags []string `json:"updated_tags"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, "", fmt.Errorf("the payload is not JSON: %v", err)
	}
	var images []string
	switch {
	case p.PushData != nil:
		var repo struct {
			RepoName string `json:"repo_name"`
		}
		if err := json.Unmarshal(p.Repository, &repo); err != nil || repo.RepoName == "" {
			return nil, "", errors.New("a Docker Hub payload without repository.repo_name")
		}
		return []string{withTag(repo.RepoName, p.PushData.Tag)}, "dockerhub", nil
	case len(p.Events) > 0:
		for _, e := range p.Events {
			if e.Action != "push" || e.Target.Repository == "" || e.Request.Host == "" || blobPush(e.Target.Tag, e.Target.MediaType) {
				continue
			}
			images = append(images, withTag(e.Request.Host+"/"+e.Target.Repository, e.Target.Tag))
		}
		if len(images) == 0 {
			return nil, "", errNoPushEvents
		}
		return dedupe(images), "distribution", nil
	case p.EventData != nil:
		if p.Type != "PUSH_ARTIFACT" && p.Type != "pushImage" {
			return nil, "", fmt.Errorf("a Harbor %q event; only pushes are handled", p.Type)
		}
		for _, r := range p.EventData.Resources {
			if r.ResourceURL != "" {
				images = append(images, r.ResourceURL)
			}
		}
		if len(images) == 0 {
			return nil, "", errors.New("a Harbor payload without event_data.resources[].resource_url")
		}
		return dedupe(images), "harbor", nil
	case p.DockerURL != "":
		// Quay lists the updated tags; the repository is refreshed as a
		// whole either way.
		return []string{p.DockerURL}, "quay", nil
	}
	return nil, "", errors.New("the payload is none of Docker Hub, distribution, Harbor or Quay")
}

// firstLineOf is an error's first line: its message without its help.
func firstLineOf(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// blobPush reports whether a distribution push event is of a blob (a
// layer or a config): the registry sends one per blob before the
// manifest's, and only the manifest's names a tag. A blob changes no tag,
// so it costs no refresh; an untagged manifest push (by digest) without
// a media type is still refreshed, in doubt.
func blobPush(tag, mediaType string) bool {
	if tag != "" {
		return false
	}
	mt := strings.ToLower(mediaType)
	return mt != "" && !strings.Contains(mt, "manifest") && !strings.Contains(mt, "image.index")
}

func withTag(repo, tag string) string {
	if tag == "" {
		return repo
	}
	return repo + ":" + tag
}

func dedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
