package gates

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/fluxd/fluxd/internal/giturl"
	"github.com/fluxd/fluxd/promotion"
)

// runHTTP GETs the check's URL until it answers 2xx, at most Retries+1
// times, Interval apart, each try within Timeout.
func (g *Gates) runHTTP(ctx context.Context, c promotion.HTTPCheck) error {
	timeout := or(c.Timeout, promotion.DefaultCheckTimeout)
	interval := or(c.Interval, promotion.DefaultCheckInterval)
	tries := max(c.Retries, 0) + 1
	shown := giturl.Redact(c.URL)
	var last error
	backoff := wait.Backoff{Duration: interval, Factor: 1, Steps: tries}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = g.get(ctx, c.URL, timeout)
		return last == nil, nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		// fluxd is stopping, or the caller gave up: not the check's fault.
		return fmt.Errorf("GET %s was stopped before it answered 2xx: %w", shown, context.Cause(ctx))
	case tries == 1:
		return fmt.Errorf("GET %s %w (the check has no retries: set retries and interval to try again)", shown, last)
	}
	return fmt.Errorf("GET %s did not answer 2xx in %d tries, %s apart; the last %w", shown, tries, interval, last)
}

// get does one GET; nil when it answered 2xx within timeout. Its error
// reads after "GET URL": "answered 503 ...", "had no answer within
// 10s", "failed: connection refused".
func (g *Gates) get(ctx context.Context, rawURL string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fmt.Errorf("could not be made: %s", giturl.RedactError(rawURL, err))
	}
	req.Header.Set("User-Agent", "fluxd-promotion-check")
	resp, err := g.opts.httpClient.Do(req)
	if err != nil {
		return requestError(ctx, rawURL, timeout, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	if b := snippet(body); b != "" {
		return fmt.Errorf("answered %s: %s", resp.Status, b)
	}
	return fmt.Errorf("answered %s", resp.Status)
}

// requestError says why a request got no answer, without the URL that
// net/http's errors quote (its query string may hold a token).
func requestError(ctx context.Context, rawURL string, timeout time.Duration, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("had no answer within %s (the check's timeout)", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("failed: %s", giturl.RedactError(rawURL, err))
}

// snippet is the start of a body, on one line and printable, for the
// failure's reason (a health endpoint often says what is wrong).
func snippet(b []byte) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return ' '
		}
		if !unicode.IsPrint(r) {
			return -1
		}
		return r
	}, string(b))
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
