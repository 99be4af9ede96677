package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/clientkey"
)

// Signed bodies are read before the signature is checked, so only a few at
// once; and an operator may refuse signatures without a timestamp.
func TestSignedReadsAreBoundedAndTimestampsCanBeRequired(t *testing.T) {
	h := newTestWebhook(t)
	post := func(sig, ts string) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader(pushOfApp))
		req.Header.Set(SignatureHeader, sig)
		if ts != "" {
			req.Header.Set(TimestampHeader, ts)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	h.readsMu.Lock()
	h.signedReads = maxSignedReads // as many slow senders
	h.readsMu.Unlock()
	if code := post(sign("s3cret", "", pushOfApp), ""); code != http.StatusServiceUnavailable {
		t.Errorf("a signed notification while %d are read: %d; want 503", maxSignedReads, code)
	}
	h.readsMu.Lock()
	h.signedReads = 0
	h.readsMu.Unlock()
	if code := post(sign("s3cret", "", pushOfApp), ""); code != http.StatusAccepted {
		t.Errorf("a signed notification: %d; want 202", code)
	}
	h.RequireTimestamp = true
	if code := post(sign("s3cret", "", pushOfApp), ""); code != http.StatusUnauthorized {
		t.Errorf("a signature without a timestamp when one is required: %d; want 401", code)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	if code := post(sign("s3cret", ts, pushOfApp), ts); code != http.StatusAccepted {
		t.Errorf("a signature with a timestamp: %d; want 202", code)
	}
}

// Senders that claim a signature but trickle their bodies cannot take
// every read slot from one address: a genuine sender from another
// address is still served.
func TestSignedReadsAreLimitedPerAddress(t *testing.T) {
	h := newTestWebhook(t)
	var held []*io.PipeWriter
	defer func() {
		for _, w := range held {
			_ = w.Close()
		}
	}()
	claimed := "sha256=" + strings.Repeat("00", 32)
	var wg sync.WaitGroup
	codes := make(chan int, 100)
	for i := range 40 {
		pr, pw := io.Pipe()
		held = append(held, pw)
		req := httptest.NewRequest(http.MethodPost, "/v1/notify", pr)
		req.RemoteAddr = "10.0.0.66:" + strconv.Itoa(40000+i)
		req.Header.Set(SignatureHeader, claimed)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			codes <- rec.Code
		}()
	}
	// All but maxSignedReadsPerAddr are refused at once, with 429.
	for range 40 - maxSignedReadsPerAddr {
		if c := <-codes; c != http.StatusTooManyRequests {
			t.Fatalf("a slow signed sender beyond its address's share: %d, want 429", c)
		}
	}
	body := pushOfApp
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(body))
	req := httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader(body))
	req.RemoteAddr = "192.0.2.10:5555"
	req.Header.Set(SignatureHeader, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("a genuine signed sender while another address trickles: %d %s", rec.Code, rec.Body)
	}
	for _, w := range held {
		_ = w.CloseWithError(errors.New("gone"))
	}
	wg.Wait()
}

// slowReads starts signed reads whose bodies never come, one per
// (remote, X-Forwarded-For) pair given, and returns the codes of those
// refused at once; the others hold their slots until the test ends.
type slowReads struct {
	t     *testing.T
	h     *Handler
	held  []*io.PipeWriter
	wg    sync.WaitGroup
	codes chan int
}

func newSlowReads(t *testing.T, h *Handler) *slowReads {
	s := &slowReads{t: t, h: h, codes: make(chan int, 1000)}
	t.Cleanup(func() {
		for _, w := range s.held {
			_ = w.CloseWithError(errors.New("gone"))
		}
		s.wg.Wait()
	})
	return s
}

func (s *slowReads) start(remote, xff string) {
	pr, pw := io.Pipe()
	s.held = append(s.held, pw)
	req := httptest.NewRequest(http.MethodPost, "/v1/notify", pr)
	req.RemoteAddr = remote
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	req.Header.Set(SignatureHeader, "sha256="+strings.Repeat("00", 32))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		rec := httptest.NewRecorder()
		s.h.ServeHTTP(rec, req)
		s.codes <- rec.Code
	}()
}

// refused waits for n refusals, each of which must be code.
func (s *slowReads) refused(n, code int, what string) {
	s.t.Helper()
	for range n {
		if c := <-s.codes; c != code {
			s.t.Fatalf("%s: %d, want %d", what, c, code)
		}
	}
}

// signedFrom posts a genuine signed notification from remote, with
// X-Forwarded-For xff.
func signedFrom(h *Handler, remote, xff string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/notify", strings.NewReader(pushOfApp))
	req.RemoteAddr = remote
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	req.Header.Set(SignatureHeader, sign("s3cret", "", pushOfApp))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Behind an Ingress every sender reaches fluxd from the Ingress's
// address. With the Ingress among the trusted proxies, one slow sender
// holds its own share of signed reads only, and another sender through
// the same Ingress is served; without, the forwarded header is not
// believed, and everyone through the Ingress shares one share.
func TestSignedReadsCountPerForwardedSender(t *testing.T) {
	for _, tc := range []struct {
		name    string
		proxies []string
		want    int
	}{
		{"the Ingress is a trusted proxy", []string{"10.0.0.0/8"}, http.StatusAccepted},
		{"no trusted proxy: the header is not believed", nil, http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestWebhook(t)
			p, err := clientkey.ParseProxies(tc.proxies)
			if err != nil {
				t.Fatal(err)
			}
			h.TrustedProxies = p
			slow := newSlowReads(t, h)
			// The slow sender writes other addresses at the left, which
			// the Ingress keeps: only the one it appended counts.
			for i := range 6 {
				slow.start("10.0.0.1:"+strconv.Itoa(40000+i), "192.0.2."+strconv.Itoa(i)+", 203.0.113.5")
			}
			slow.refused(6-maxSignedReadsPerAddr, http.StatusTooManyRequests, "the slow sender beyond its share")
			if rec := signedFrom(h, "10.0.0.1:50000", "198.51.100.7"); rec.Code != tc.want {
				t.Errorf("a genuine sender through the same Ingress: %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
		})
	}
}

// A flood of slow signed reads from many addresses fills only the slots
// open to senders fluxd does not know: a sender whose signature was
// valid lately is still served, and a new sender is told to retry.
func TestSignedReadsKeepSlotsForKnownSigners(t *testing.T) {
	h := newTestWebhook(t)
	if rec := signedFrom(h, "192.0.2.10:5555", ""); rec.Code != http.StatusAccepted {
		t.Fatalf("a genuine sender before the flood: %d %s", rec.Code, rec.Body)
	}
	slow := newSlowReads(t, h)
	for i := range 100 {
		slow.start("198.51."+strconv.Itoa(i/200)+"."+strconv.Itoa(i%200+1)+":40000", "")
	}
	open := maxSignedReads - keptSignedReads
	slow.refused(100-open, http.StatusServiceUnavailable, "a slow sender beyond the open slots")
	if rec := signedFrom(h, "203.0.113.99:5555", ""); rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a sender fluxd does not know, during the flood: %d, want 503", rec.Code)
	}
	for range 3 {
		if rec := signedFrom(h, "192.0.2.10:5556", ""); rec.Code != http.StatusAccepted {
			t.Fatalf("the known sender during the flood: %d %s, want 202", rec.Code, rec.Body)
		}
	}
}
