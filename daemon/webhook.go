package daemon

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/registry"
)

// WebhookHandler serves POST /v1/notify: registries' push notifications.
// It understands the payloads of Docker Hub, the CNCF distribution
// registry (notifications), Harbor and Quay, and refreshes each pushed
// repository at once, waking the automator, as NotifyImage does.
//
// A request is accepted with the shared secret as a bearer token, in the
// X-Fluxd-Secret header, or in the token query parameter (for senders
// that cannot set headers, such as Docker Hub); or with an HMAC-SHA256 of
// the body under the secret in X-Hub-Signature-256 ("sha256=<hex>").
// Comparisons take constant time.
type WebhookHandler struct {
	d      *Daemon
	secret []byte
	log    *slog.Logger
	leader WebhookLeadership
	client *http.Client
}

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
// them (the refresh alone would only warm the shared cache).
func (h *WebhookHandler) FollowLeader(l WebhookLeadership) {
	h.leader, h.client = l, &http.Client{Timeout: 30 * time.Second}
}

// forward passes a notification to the leader, with the shared secret.
func (h *WebhookHandler) forward(w http.ResponseWriter, r *http.Request, body []byte) {
	addr := h.leader.LeaderWebhookAddr()
	if addr == "" || r.Header.Get(forwardedWebhook) != "" {
		http.Error(w, "no fluxd replica leads just now (an election is under way); send the notification again in a few seconds", http.StatusServiceUnavailable)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, "http://"+addr+"/v1/notify", bytes.NewReader(body))
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

// NewWebhookHandler returns the handler; secret must not be empty.
func NewWebhookHandler(d *Daemon, secret []byte, log *slog.Logger) (*WebhookHandler, error) {
	if len(secret) == 0 {
		return nil, errors.New("the webhook secret is empty")
	}
	return &WebhookHandler{d: d, secret: secret, log: log.With("component", "webhook")}, nil
}

// webhookIdentity is who a notification acts as: it only refreshes
// shared registry data, never anything of an instance.
var webhookIdentity = auth.Identity{Instance: "webhook", Role: auth.Deployer}

const maxPayload = 1 << 20

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
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPayload+1))
	if err != nil || len(body) > maxPayload {
		http.Error(w, "the payload is unreadable or larger than 1 MiB", http.StatusBadRequest)
		return
	}
	if !h.authentic(r, body) {
		h.log.Info("webhook refused: no valid secret or signature", "remote", r.RemoteAddr)
		http.Error(w, "no valid secret or signature: send the shared secret as a bearer token, X-Fluxd-Secret or ?token=, or sign the body (X-Hub-Signature-256)", http.StatusUnauthorized)
		return
	}
	if h.leader != nil && !h.leader.IsLeader() {
		h.forward(w, r, body)
		return
	}
	images, source, err := parseNotification(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	type result struct {
		Image      string `json:"image"`
		Repository string `json:"repository,omitempty"`
		Tags       int    `json:"tags,omitempty"`
		Error      string `json:"error,omitempty"`
	}
	var out []result
	status := http.StatusAccepted
	refreshed := map[string]bool{}
	for _, img := range images {
		// One refresh per repository, however many of its tags were pushed.
		if ref, err := registry.ParseRef(img); err == nil {
			if refreshed[ref.Repository] {
				continue
			}
			refreshed[ref.Repository] = true
		}
		repo, n, err := h.d.Notify(r.Context(), webhookIdentity, img)
		res := result{Image: img, Repository: repo, Tags: n}
		if err != nil {
			res.Error = err.Error()
			status = http.StatusBadGateway
		}
		out = append(out, res)
	}
	h.log.Info("webhook accepted", "source", source, "images", images)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"source": source, "results": out})
}

func (h *WebhookHandler) authentic(r *http.Request, body []byte) bool {
	candidates := []string{r.Header.Get("X-Fluxd-Secret"), r.URL.Query().Get("token")}
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "bearer") {
		candidates = append(candidates, strings.TrimSpace(tok))
	}
	for _, c := range candidates {
		if c != "" && subtle.ConstantTimeCompare([]byte(c), h.secret) == 1 {
			return true
		}
	}
	if sig, ok := strings.CutPrefix(r.Header.Get("X-Hub-Signature-256"), "sha256="); ok {
		got, err := hex.DecodeString(sig)
		if err != nil {
			return false
		}
		mac := hmac.New(sha256.New, h.secret)
		mac.Write(body)
		return hmac.Equal(got, mac.Sum(nil))
	}
	return false
}

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
			if e.Action != "push" || e.Target.Repository == "" || e.Request.Host == "" {
				continue
			}
			images = append(images, withTag(e.Request.Host+"/"+e.Target.Repository, e.Target.Tag))
		}
		if len(images) == 0 {
			return nil, "", errors.New("a distribution notification without push events")
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
