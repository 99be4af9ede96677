package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/promotion"
)

// ApprovePath is where CI posts approvals.
const ApprovePath = "/v1/approve"

// Approver approves a bundle into a stage as by: the promotion loop
// (promotion.Controller), wired by cmd/fluxd. The same by approving twice
// counts once.
type Approver interface {
	Approve(ctx context.Context, pipeline, stage, bundle, by string) (promotion.Record, error)
}

// Approvals serves POST /v1/approve: CI approving a bundle into a stage
// that asks for approvals (the design notes' "kicked out by a hook from
// CircleCI"). The body is JSON, {"pipeline", "stage", "bundle", "by"},
// signed as a registry notification is (X-Hub-Signature-256: "sha256="
// and the hex HMAC-SHA256, under the approval secret, of the
// X-Fluxd-Timestamp, a ".", then the body), under the same limits on
// reading signed bodies. Unlike a notification, an approval needs the
// signature and a timestamp within 5 minutes of fluxd's clock: the
// shared secret alone, or a signature without a timestamp, is refused,
// so that a captured approval cannot be replayed and the secret never
// travels.
//
// The approval is recorded as "webhook:KEY", the secret's name: one
// secret is one approver, however many times and under whatever names
// CI sends it, since whoever holds the secret could name anyone. The
// body's "by" (who in CI approved) is logged with the approval.
type Approvals struct {
	*signed

	key      string
	approver Approver
	log      *slog.Logger
}

// NewApprovals returns the approval webhook. key names the secret in
// approvers ("webhook:KEY"); secret must not be empty.
func NewApprovals(a Approver, key string, secret []byte, log *slog.Logger) (*Approvals, error) {
	if len(secret) == 0 {
		return nil, errors.New("the approval webhook's secret is empty")
	}
	if !approverName.MatchString(key) {
		return nil, fmt.Errorf("the approval webhook's key name %q: want up to 64 letters, digits and . _ @ + -", key)
	}
	s := newSigned(secret)
	s.RequireTimestamp = true
	return &Approvals{signed: s, key: key, approver: a, log: log.With("component", "webhook", "webhook", "approve")}, nil
}

// approval is the body CI posts.
type approval struct {
	Pipeline string `json:"pipeline"`
	Stage    string `json:"stage"`
	Bundle   string `json:"bundle"`
	By       string `json:"by"`
}

// approverName is what a by (or key) may be: it is shown in fluxctl
// stages, the page and the history, and must not be able to write
// anything but a name there.
var approverName = regexp.MustCompile(`^[A-Za-z0-9._@+-]{1,64}$`)

// maxApproval is the largest approval body read.
const maxApproval = 16 << 10

func (a *Approvals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != ApprovePath {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "use POST", http.StatusMethodNotAllowed)
		return
	}
	if r.Header.Get(TimestampHeader) == "" || !a.signedInWindow(r) {
		a.log.Info("approval refused: no valid signature and timestamp", "remote", r.RemoteAddr)
		http.Error(w, "an approval must be signed: X-Fluxd-Timestamp (Unix seconds, within 5 minutes of fluxd's clock) and X-Hub-Signature-256 (sha256= and the hex HMAC-SHA256, under the approval secret, of TIMESTAMP.BODY)", http.StatusUnauthorized)
		return
	}
	if r.ContentLength > maxApproval {
		http.Error(w, "an approval is at most 16 KiB", http.StatusRequestEntityTooLarge)
		return
	}
	sender, release, ok := a.admitRead(w, r, "requests")
	if !ok {
		return
	}
	defer release()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxApproval))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "an approval is at most 16 KiB", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "the approval could not be read", http.StatusBadRequest)
		return
	}
	if !a.validSignature(r, body) {
		a.log.Info("approval refused: the signature does not match", "remote", r.RemoteAddr)
		http.Error(w, "the signature does not match the body (X-Hub-Signature-256: sha256=HMAC-SHA256, under the approval secret, of TIMESTAMP.BODY)", http.StatusUnauthorized)
		return
	}
	a.signers.Saw(sender, a.now())
	var ap approval
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ap); err != nil {
		http.Error(w, fmt.Sprintf(`the approval is not {"pipeline": P, "stage": S, "bundle": B, "by": WHO}: %v`, err), http.StatusBadRequest)
		return
	}
	if ap.Pipeline == "" || ap.Stage == "" || ap.Bundle == "" {
		http.Error(w, `an approval names its pipeline, stage and bundle (an ID or a unique prefix, as fluxctl bundles shows it): {"pipeline": P, "stage": S, "bundle": B, "by": WHO}`, http.StatusBadRequest)
		return
	}
	if ap.By != "" && !approverName.MatchString(ap.By) {
		http.Error(w, fmt.Sprintf("by %q: give up to 64 letters, digits and . _ @ + - (who in CI approves, e.g. a CI user or job)", ap.By), http.StatusBadRequest)
		return
	}
	by := "webhook:" + a.key
	log := a.log
	if ap.By != "" {
		// Logged, not counted: the secret is the approver.
		log = log.With("sender", ap.By)
	}
	rec, err := a.approver.Approve(r.Context(), ap.Pipeline, ap.Stage, ap.Bundle, by)
	if err != nil {
		code := approvalCode(err)
		if code == http.StatusInternalServerError {
			log.Error("approval failed", "pipeline", ap.Pipeline, "stage", ap.Stage, "bundle", ap.Bundle, "by", by, "error", err)
			http.Error(w, "fluxd could not record the approval; its log says why. Send it again later.", code)
			return
		}
		log.Info("approval refused", "pipeline", ap.Pipeline, "stage", ap.Stage, "bundle", ap.Bundle, "by", by, "error", fluxerr.FirstLine(err))
		http.Error(w, err.Error(), code)
		return
	}
	log.Info("approval accepted", "pipeline", ap.Pipeline, "stage", ap.Stage, "bundle", rec.Bundle, "by", by, "approvers", len(rec.Approvers))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"pipeline": ap.Pipeline, "stage": ap.Stage, "bundle": rec.Bundle, "status": rec.Status,
		"approver": by, "approvers": rec.Approvers,
	})
}

// approvalCode is the HTTP status of the promotion loop's refusal.
func approvalCode(err error) int {
	if errors.Is(err, promotion.ErrTransition) {
		return http.StatusConflict // not awaiting approval (any more)
	}
	var fe *fluxerr.Error
	if !errors.As(err, &fe) {
		return http.StatusInternalServerError
	}
	switch fe.Kind {
	case fluxerr.User:
		return http.StatusBadRequest
	case fluxerr.Missing:
		return http.StatusNotFound
	case fluxerr.Precondition:
		return http.StatusConflict
	case fluxerr.Forbidden:
		return http.StatusForbidden
	case fluxerr.Unavailable:
		return http.StatusServiceUnavailable
	case fluxerr.Unimplemented:
		return http.StatusNotImplemented
	}
	return http.StatusInternalServerError
}
