package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// statusPage is fluxd's status page open in headless Chromium, signed in.
type statusPage struct {
	ctx   context.Context
	shots string // the test's artifact directory
	// What a sign-in again needs, when chromium exits under the test.
	t             *testing.T
	browser, base string
	token         string
	log           *lockedBuffer // chromium's own output, for the failure message
	reopened      bool
}

// openStatusPage starts Debian's chromium headless on the page at base
// and signs in with token. The browser stops when the test ends.
func openStatusPage(t *testing.T, base, token string) *statusPage {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium: run 'make deps' (hack/deps.sh installs Debian's chromium): %v", err)
	}
	waitHTTP(t, base+"/")
	// A headless chromium that stalls on its first page (seen once in
	// CI: the sign-in waited 15 minutes on a page that answers, and
	// passed at once on its own) is started again, once: a page that
	// really does not sign in fails both times.
	var first error
	for attempt := 1; ; attempt++ {
		log := &lockedBuffer{}
		ctx, err := signIn(t, browser, base, token, log)
		if err == nil {
			return &statusPage{ctx: ctx, shots: screenshotDir(t), t: t, browser: browser, base: base, token: token, log: log}
		}
		if attempt == 2 {
			t.Fatalf("sign in to the status page: %v (and before, with a fresh chromium: %v)", err, first)
		}
		first = err
		t.Logf("sign in to the status page: %v; starting chromium again", err)
	}
}

// signIn starts a chromium on the page at base and signs in with token
// within 3 minutes; the page's context lasts 15.
func signIn(t *testing.T, browser, base, token string, log io.Writer) (context.Context, error) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.CombinedOutput(log), chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 15*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		return nil, fmt.Errorf("starting chromium: %w", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err := chromedp.Do(sctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.SendKeys(chromedp.ID("name"), "Rollout Watcher"),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.ID("services")))
	if err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`body`)))
		cancelTime()
		cancelTab()
		cancelAlloc()
		return nil, fmt.Errorf("%w; the page says: %q", err, page)
	}
	return ctx, nil
}

// jobError opens job id's page, waits until it says the job failed, saves
// a screenshot named shot, and returns the error the page shows.
func (p *statusPage) jobError(t *testing.T, id, shot string) string {
	t.Helper()
	p.aliveOrAgain(t)
	browse(t, p.ctx, "job "+id,
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/job/`+id+`'`, chromedp.EvalIgnoreExceptions),
		waitText(`#job-state`, "failed"),
		chromedp.WaitVisible(chromedp.ID("job-error")),
		p.shot("job-"+shot))
	return value(t, p.ctx, chromedp.Text(chromedp.ID("job-error")))
}

// failedHistory opens the history filtered to service's failed events and
// returns the table's rows as text.
func (p *statusPage) failedHistory(t *testing.T, service string) string {
	t.Helper()
	p.aliveOrAgain(t)
	browse(t, p.ctx, "failed history of "+service,
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/history?service=`+url.QueryEscape(service)+`&type=failed'`, chromedp.EvalIgnoreExceptions),
		waitText(`#history caption`, "events"),
		p.shot("history-failed"))
	return value(t, p.ctx, chromedp.Text(chromedp.CSS(`#history tbody`)))
}

// aliveOrAgain signs in with a fresh chromium, once per page, when the
// one before has exited while the test waited on a rollout. In CI a
// headless chromium left idle for minutes on a machine under load once
// exited by itself (status 0), and every step after it failed with
// "browser process exited"; the page under test was never asked.
func (p *statusPage) aliveOrAgain(t *testing.T) {
	t.Helper()
	// A chromium that hangs rather than exits answers nothing: that is
	// the page's failure to report, after half a minute, not a wait of
	// the page's whole 15 minutes.
	alive, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	_, err := chromedp.Run(alive, chromedp.Evaluate[int](`1`))
	cancel()
	if err == nil {
		return
	} else if p.reopened {
		t.Fatalf("chromium exited again (%v); its output:\n%s", err, tail(p.log.String(), 2000))
	} else {
		t.Logf("chromium exited under the test (%v); signing in with a fresh one. Its output:\n%s", err, tail(p.log.String(), 2000))
	}
	p.reopened = true
	p.log = &lockedBuffer{}
	ctx, err := signIn(p.t, p.browser, p.base, p.token, p.log)
	if err != nil {
		t.Fatalf("sign in to the status page again: %v", err)
	}
	p.ctx = ctx
}

// lockedBuffer is chromium's output, written by chromedp's goroutine
// and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (p *statusPage) shot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		b, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		return saveScreenshot(p.shots, name, b)
	})
}

// listJobs is 'fluxctl jobs -o json'.
func listJobs(t *testing.T, env []string) []jobJSON {
	t.Helper()
	out, stderr, code := fluxctl(t, env, "jobs", "-o", "json")
	var jobs []jobJSON
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil {
		t.Fatalf("jobs: exit %d\n%s%s", code, out, stderr)
	}
	return jobs
}

// newFailedJob returns the ID of the one failed job of service not in
// seen, and adds it there.
func newFailedJob(t *testing.T, env []string, seen map[string]bool, service string) string {
	t.Helper()
	var found []string
	var all []string
	for _, j := range listJobs(t, env) {
		all = append(all, fmt.Sprintf("%s %s %q", j.ID, j.State, j.Error))
		if !seen[j.ID] && j.State == "failed" && strings.Contains(j.Error, service) {
			found = append(found, j.ID)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one new failed job of %s, found %v among %v", service, found, all)
	}
	seen[found[0]] = true
	return found[0]
}
