package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Timestamp and signature headers of signed notifications.
const (
	TimestampHeader = "X-Fluxd-Timestamp"
	SignatureHeader = "X-Hub-Signature-256"
)

// signatureWindow is how far a signed timestamp may be from now.
const signatureWindow = 5 * time.Minute

// hasSecret reports whether the request carries the shared secret in a
// header or the query string.
func (h *signed) hasSecret(r *http.Request) bool {
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
func (h *signed) signedInWindow(r *http.Request) bool {
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
func (h *signed) validSignature(r *http.Request, body []byte) bool {
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
