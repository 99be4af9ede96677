package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/localstack"
)

// The status page in a real browser (Debian's chromium, headless, driven
// by chromedp) on the real stack: sign in with the keyboard, see the
// services, watch a release started from the CLI on the page without a
// reload until it is done, then a release whose pods never become ready
// fail there with its reason; the page's landmarks and labels are there
// for screen readers. Screenshots are kept in the test's artifact
// directory (go test -artifacts), and in docs/images with -update-screenshots.
func TestStatusPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium: run 'make deps' (hack/deps.sh installs Debian's chromium): %v", err)
	}
	img := faultService(t, "web-e2e", "webapp", 2, 0, "1.1.0", "1.2.0-broken")
	const forge = "https://forge.example/fluxd/commit"
	webAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	f := startFaultFluxd(t, "fluxd-web", "web-e2e", nil, "--web-listen="+webAddr, "--rollout-timeout=1m",
		"--sync-interval=1h", // a sync at start: the page shows each service's state against git
		"--git-web-url="+forge)
	base := "http://" + webAddr
	waitHTTP(t, base+"/")
	deployer := []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"]}

	checkWebSecurity(t, base, f.Tokens)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1000),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	// The page's console: an uncaught exception or a Content-Security-
	// Policy refusal fails the test.
	// The browser and its tab start first, so that the console is read
	// from the page's first message on.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	var consoleMu sync.Mutex
	var consoleProblems []string
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Refused to") {
				consoleMu.Lock()
				consoleProblems = append(consoleProblems, m.String())
				consoleMu.Unlock()
			}
		}
	}()
	defer func() {
		consoleMu.Lock()
		defer consoleMu.Unlock()
		for _, p := range consoleProblems {
			t.Errorf("the page's console: %s", p)
		}
	}()
	shots := screenshotDir(t)
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			b, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return saveScreenshot(shots, name, b)
		})
	}

	// Sign in with the keyboard only: the token field has focus and a
	// label, Tab moves to the name, Enter submits.
	browse(t, ctx, "open the page",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.KeyEvent(f.Tokens["deployer"]),
		chromedp.KeyEvent(kb.Tab))
	focused := value(t, ctx, chromedp.Evaluate[string](`document.activeElement.id`))
	tokenLabel := value(t, ctx, chromedp.Text(chromedp.CSS(`label[for="token"]`)))
	if focused != "name" || tokenLabel != "API token" {
		t.Errorf("keyboard: Tab from the token reaches %q (want the name field); the token field's label is %q", focused, tokenLabel)
	}
	browse(t, ctx, "sign in",
		chromedp.KeyEvent("Web Tester"),
		shot("signin"),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#services tr[data-service="default:deployment/webapp"]`)),
		waitText(`#conn`, "live"),
		waitText(`#services tr[data-service="default:deployment/webapp"]`, "synced"),
		shot("services"))
	services := value(t, ctx, chromedp.Text(chromedp.CSS(`#services tr[data-service="default:deployment/webapp"]`)))
	if !value(t, ctx, chromedp.Evaluate[bool](`document.activeElement === document.querySelector('main')`)) {
		t.Error("after signing in, focus is not on the page's main content")
	}
	roles := value(t, ctx, chromedp.Evaluate[[]string](`[
			document.querySelector('nav').getAttribute('aria-label'),
			document.querySelector('#services caption') ? 'caption' : '',
			document.querySelector('button[aria-label="Release the newest images of default:deployment/webapp"]') ? 'release-label' : '',
			document.querySelector('[role=status][aria-live=polite]') ? 'live-region' : '',
			document.querySelector('main') ? 'main' : ''
		]`))
	for _, want := range []string{img + "1.0.0", "newest allowed"} {
		if !strings.Contains(services, want) {
			t.Errorf("the services row of webapp does not say %q:\n%s", want, services)
		}
	}
	if strings.Join(roles, ",") != "Main,caption,release-label,live-region,main" {
		t.Errorf("screen reader landmarks and labels: %v", roles)
	}

	// A release from the CLI: the jobs page, left open, shows the job
	// as it comes, and its page follows it to the end without a reload.
	browse(t, ctx, "open jobs",
		chromedp.Evaluate[chromedp.Void](`window.e2eMarker = 'kept'; location.hash = '#/jobs'`, chromedp.EvalIgnoreExceptions),
		chromedp.WaitVisible(chromedp.ID("jobs")))
	id := releaseNoWait(t, deployer, "-s", "webapp", "-i", img+"1.1.0", "--user", "Web-E2E")
	browse(t, ctx, "follow the release",
		chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="`+id+`"]`)),
		chromedp.Click(chromedp.CSS(`#jobs tr[data-job="`+id+`"] a`)),
		chromedp.WaitVisible(chromedp.ID("job-log")),
		waitText(`#job-state`, "succeeded"),
		waitText(`#job-log`, "done: commit"),
		shot("job"))
	stage := value(t, ctx, chromedp.Text(chromedp.ID("job-stage")))
	log := value(t, ctx, chromedp.TextContent(chromedp.ID("job-log")))
	if !value(t, ctx, chromedp.Evaluate[bool](`window.e2eMarker === 'kept'`)) {
		t.Error("the page was reloaded while it followed the job")
	}
	for _, want := range []string{"queued by Web-E2E", "fetching the git remote", "container app: " + img + "1.0.0 -> " + img + "1.1.0", "pushed commit", "applying to the cluster", "following the rollout", "default:deployment/webapp: rolled out (2/2 ready)", "done: commit"} {
		if !strings.Contains(log, want) {
			t.Errorf("the job's log on the page lacks %q:\n%s", want, log)
		}
	}
	if stage != "done" {
		t.Errorf("stage %q, want done", stage)
	}

	// A release whose pods never become ready fails, and the page says why.
	id = releaseNoWait(t, deployer, "-s", "webapp", "-i", img+"1.2.0-broken", "--rollout-timeout", "8s", "--user", "Web-E2E")
	browse(t, ctx, "a failed rollout",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/job/`+id+`'`, chromedp.EvalIgnoreExceptions),
		waitText(`#job-state`, "failed"),
		shot("job-failed"))
	reason := value(t, ctx, chromedp.Text(chromedp.ID("job-error")))
	log = value(t, ctx, chromedp.TextContent(chromedp.ID("job-log")))
	if !strings.Contains(reason, "the rollout of default:deployment/webapp failed") || !strings.Contains(log, "failed: the rollout of default:deployment/webapp failed") {
		t.Errorf("the failed job's reason on the page: %q\nlog:\n%s", reason, log)
	}
	if !value(t, ctx, chromedp.Evaluate[bool](`window.e2eMarker === 'kept'`)) {
		t.Error("the page was reloaded while it followed the failing job")
	}

	// A deployer acts from the page: a release of an image picked on the
	// service's page, its plan shown and confirmed (executed with the
	// plan's checksum), followed to its end; a lock with its reason and
	// an unlock; a job cancelled while it rolls out (rolled back).
	row := `#services tr[data-service="default:deployment/webapp"]`
	browse(t, ctx, "release from the page",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/service/default%3Adeployment%2Fwebapp'`, chromedp.EvalIgnoreExceptions),
		chromedp.WaitVisible(chromedp.CSS(`button[aria-label="Release `+img+`1.1.0"]`)),
		chromedp.Click(chromedp.CSS(`button[aria-label="Release `+img+`1.1.0"]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-release")),
		waitText(`#plan-dialog`, img+"1.2.0-broken → "+img+"1.1.0"),
		shot("plan"),
		chromedp.Click(chromedp.ID("confirm-release")),
		chromedp.WaitVisible(chromedp.ID("job-log")),
		waitText(`#job-state`, "succeeded"),
		waitText(`#job-log`, "queued by Web Tester"),
		// The job followed live from the dialog shows its plan, as the
		// same job opened fresh does.
		waitText(`#job-head table[aria-label="Plan"]`, img+"1.1.0"))
	browse(t, ctx, "lock and unlock from the page",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/services'`, chromedp.EvalIgnoreExceptions),
		chromedp.Click(chromedp.CSS(`button[aria-label="Lock default:deployment/webapp"]`)),
		chromedp.WaitVisible(chromedp.ID("ask-input")),
		chromedp.SendKeys(chromedp.ID("ask-input"), "release freeze"),
		chromedp.KeyEvent(kb.Enter),
		waitText(row, "locked by Web Tester"),
		waitText(row, "release freeze"),
		shot("locked"),
		chromedp.Click(chromedp.CSS(`button[aria-label="Unlock default:deployment/webapp"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[aria-label="Lock default:deployment/webapp"]`)))
	if out, stderr, code := fluxctl(t, deployer, "history", "webapp"); code != 0 || !strings.Contains(out, "release freeze") {
		t.Errorf("history after the page's lock: exit %d\n%s%s", code, out, stderr)
	}
	id = releaseNoWait(t, deployer, "-s", "webapp", "-i", img+"1.2.0-broken", "--rollout-timeout", "2m", "--user", "Web-E2E")
	browse(t, ctx, "cancel from the page",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/job/`+id+`'`, chromedp.EvalIgnoreExceptions),
		waitText(`#job-stage`, "rolling out"),
		// The job's head is drawn again on every event: clicked by the
		// page's own script, the button is the one on screen now (a
		// node chromedp resolved a moment ago may be gone).
		chromedp.Evaluate[chromedp.Void](`document.getElementById('cancel-job').click()`),
		waitText(`#job-state`, "cancelled"),
		waitText(`#job-log`, "rolling back commit"))

	// The service's page and the history, for the screenshots and the
	// history filter.
	browse(t, ctx, "service and history",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/service/default%3Adeployment%2Fwebapp'`, chromedp.EvalIgnoreExceptions),
		chromedp.WaitVisible(chromedp.CSS(`section[aria-label="Images of container app"]`)),
		shot("service"),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/history'`, chromedp.EvalIgnoreExceptions),
		chromedp.WaitVisible(chromedp.ID("history")),
		chromedp.SetValue(chromedp.ID("f-type"), "failed"),
		chromedp.SetValue(chromedp.ID("f-user"), "web-e2e"),
		chromedp.Click(chromedp.CSS(`form[role=search] button`)),
		chromedp.Sleep(time.Second),
		waitText(`#history caption`, "events"),
		shot("history"))
	hist := value(t, ctx, chromedp.Text(chromedp.CSS(`#history tbody`)))
	if !strings.Contains(hist, "default:deployment/webapp") || strings.Contains(hist, "automate") {
		t.Errorf("history filtered to failed events:\n%s", hist)
	}
	// The filter is in the URL: a reload shows the same.
	browse(t, ctx, "history filter after a reload",
		reloadPage(),
		chromedp.WaitVisible(chromedp.CSS(`#history caption`)))
	kept := value(t, ctx, chromedp.Evaluate[[]string](`[location.hash, document.getElementById('f-type').value, document.getElementById('f-user').value]`))
	if strings.Join(kept, " ") != "#/history?type=failed&user=web-e2e failed web-e2e" {
		t.Errorf("after a reload, the history's URL and filters are %q", kept)
	}

	// Links: a history row's commit links to the forge (--git-web-url),
	// and to the job that made it; the job links its commit, its
	// service and the service's history; the jobs list links commits.
	browse(t, ctx, "history links",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/history'`, chromedp.EvalIgnoreExceptions),
		chromedp.WaitVisible(chromedp.CSS(`#history a.job-link`)))
	links := value(t, ctx, chromedp.Evaluate[[]string](`(() => {
		const a = document.querySelector('#history a.job-link'), c = a.closest('tr').querySelector('a.commit');
		return [a.getAttribute('href'), c ? c.href : '', c ? c.textContent : ''];
	})()`))
	if !strings.HasPrefix(links[0], "#/job/") || !strings.HasPrefix(links[1], forge+"/") || len(strings.TrimPrefix(links[1], forge+"/")) != 40 || !strings.HasPrefix(strings.TrimPrefix(links[1], forge+"/"), links[2]) {
		t.Fatalf("a history row's job and commit links: %q", links)
	}
	browse(t, ctx, "from history to the job, and to its service's history",
		chromedp.Click(chromedp.CSS(`#history a.job-link`)),
		chromedp.WaitVisible(chromedp.CSS(`#job-commit a.commit`)),
		waitText(`#job-services`, "default:deployment/webapp"),
		chromedp.Click(chromedp.CSS(`#job-services a[href^="#/history"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#history caption`)))
	jobCommit := value(t, ctx, chromedp.Evaluate[string](`document.querySelector('#history') && document.getElementById('f-service').value`))
	if jobCommit != "default:deployment/webapp" {
		t.Errorf("the job's history link opens the history of %q, want default:deployment/webapp", jobCommit)
	}
	browse(t, ctx, "jobs link commits",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/jobs'`, chromedp.EvalIgnoreExceptions),
		chromedp.WaitVisible(chromedp.CSS(`#jobs a.commit[href^="`+forge+`/"]`)))

	// Drift: the deployment scaled by hand. A shared link with the
	// services' filters shows it alone, its health count pressed; the
	// filters change the URL; a search that matches nothing says so.
	if out, stderr, code := run(t, []string{"KUBECONFIG=" + stack.Kubeconfig}, filepath.Join(stackBinDir(t), "kubectl"), "scale", "deployment/webapp", "--replicas=3", "-n", "default"); code != 0 {
		t.Fatalf("kubectl scale: %s%s", out, stderr)
	}
	browse(t, ctx, "a shared link with filters",
		// The link opened afresh: the page is loaded again.
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/services?q=webapp&ns=default&health=drifted'`, chromedp.EvalIgnoreExceptions),
		reloadPage(),
		waitText(row, "3 replicas, git says 2"),
		waitText(`#services caption`, "1 of "),
		shot("services-filtered"))
	filters := value(t, ctx, chromedp.Evaluate[[]string](`[document.getElementById('svc-q').value, document.getElementById('svc-ns').value,
		document.querySelector('[data-health="drifted"]').getAttribute('aria-pressed'), document.querySelector('[data-health="drifted"]').textContent,
		String(document.querySelectorAll('#services tbody tr').length)]`))
	if strings.Join(filters, "|") != "webapp|default|true|1 drifted|1" {
		t.Errorf("the services' filters from a shared link (search, namespace, drifted pressed, its count, rows): %q", filters)
	}
	browse(t, ctx, "filters change the URL",
		chromedp.Click(chromedp.CSS(`[data-health="drifted"]`)),
		waitAttr(`[data-health="drifted"]`, "aria-pressed", "false"),
		chromedp.Evaluate[chromedp.Void](`(() => { const i = document.getElementById('svc-q'); i.value = 'no-such-service'; i.dispatchEvent(new Event('input')); })()`),
		waitText(`#services-empty`, "No service matches"))
	if h := value(t, ctx, chromedp.Evaluate[string](`location.hash`)); h != "#/services?q=no-such-service&ns=default" {
		t.Errorf("the URL after unpressing drifted and searching: %q", h)
	}
	browse(t, ctx, "clear the filters",
		chromedp.Click(chromedp.ID("clear-filters")),
		chromedp.WaitVisible(chromedp.CSS(row)))
	if h := value(t, ctx, chromedp.Evaluate[string](`location.hash`)); h != "#/services" {
		t.Errorf("the URL after clearing the filters: %q", h)
	}

	// Sync from the page: its dry run first, which changes nothing; then,
	// confirmed, git applied (the replicas back to git's 2).
	browse(t, ctx, "sync: the dry run",
		chromedp.Click(chromedp.ID("sync")),
		chromedp.WaitVisible(chromedp.ID("confirm-sync")),
		waitText(`#sync-dialog`, "webapp"),
		waitText(`#sync-dialog`, "configured"),
		shot("sync-dry-run"))
	if n := deploymentReplicas(t, "webapp"); n != 3 {
		t.Errorf("after the dry run, webapp has %d replicas, want the 3 it was scaled to", n)
	}
	browse(t, ctx, "sync: confirmed",
		chromedp.Click(chromedp.ID("confirm-sync")),
		chromedp.WaitVisible(chromedp.ID("sync-result")),
		waitText(`#sync-result`, "configured"),
		chromedp.Click(chromedp.ID("close-sync")),
		waitText(row, "synced"))
	if n := deploymentReplicas(t, "webapp"); n != 2 {
		t.Errorf("after the sync, webapp has %d replicas, want git's 2", n)
	}

	// Automated (within semver, so that the broken pre-release it runs is
	// left for a version), the service awaits an image: the page says when it last
	// looked, what it found and when it looks next; a push notification
	// shows as it arrives, and the release it brings follows.
	if out, stderr, code := fluxctl(t, deployer, "policy", "webapp", "--automate", "--tag-all", "semver:>=1.0.0"); code != 0 {
		t.Fatalf("automate: exit %d\n%s%s", code, out, stderr)
	}
	browse(t, ctx, "awaiting an image",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/services'`, chromedp.EvalIgnoreExceptions),
		waitText(row, "up to date"),
		waitText(row, "last checked"),
		shot("services-automated"))
	awaiting := value(t, ctx, chromedp.Text(chromedp.CSS(row)))
	if !strings.Contains(awaiting, "nothing newer") || !strings.Contains(awaiting, "next check in") {
		t.Errorf("the automated service's row:\n%s", awaiting)
	}
	if err := stack.PushImage(context.Background(), "webapp", "1.3.0", time.Date(2026, 9, 2, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := fluxctl(t, deployer, "notify", img+"1.3.0"); code != 0 {
		t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
	}
	browse(t, ctx, "a push notification",
		waitText(`#notification-list`, stack.Registry+"/webapp"),
		waitText(row, img+"1.3.0"),
		shot("notification"))

	// On a phone the tables reflow: one card per row, each value under
	// its column's heading, nothing wider than the screen.
	browse(t, ctx, "on a phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile),
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/services?q=webapp'`, chromedp.EvalIgnoreExceptions),
		reloadPage(),
		chromedp.WaitVisible(chromedp.CSS(row)),
		shot("phone-services"))
	phone := func(sel string) []string {
		return value(t, ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`(() => {
			const tr = document.querySelector(%q), td = tr.querySelector('td:nth-child(2)');
			return [getComputedStyle(tr).display, getComputedStyle(td, '::before').content, String(document.documentElement.scrollWidth <= 390), String(window.innerWidth)];
		})()`, sel)))
	}
	if got := phone(row); got[0] != "block" || got[1] != `"Status"` || got[2] != "true" {
		t.Errorf("the services on a phone (row display, the Status cell's label, page within 390 px, window width): %q", got)
	}
	browse(t, ctx, "jobs on a phone",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/jobs'`, chromedp.EvalIgnoreExceptions),
		chromedp.WaitVisible(chromedp.CSS(`#jobs tbody tr`)),
		shot("phone-jobs"))
	if got := phone(`#jobs tbody tr`); got[0] != "block" || got[1] != `"State"` || got[2] != "true" {
		t.Errorf("the jobs on a phone (row display, the State cell's label, page within 390 px, window width): %q", got)
	}
}

// deploymentReplicas is a Deployment's spec.replicas in the stack's cluster.
func deploymentReplicas(t *testing.T, name string) int32 {
	t.Helper()
	d, err := kubeClient(t).AppsV1().Deployments("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// waitAttr waits until the element's attribute is want.
func waitAttr(sel, attr, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e.getAttribute(%q) || '' : ''; })()`, sel, attr)
		var got string
		for {
			if v, err := chromedp.Evaluate[string](js)(ctx, tg); err == nil {
				if got = v; got == want {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s's %s to be %q (it is %q): %w", sel, attr, want, got, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// checkWebSecurity checks, as a client other than the page, what the page
// relies on: the session cookie's flags, the token kept out of it, CSRF
// refusals, the role checks of the API and the security headers.
func checkWebSecurity(t *testing.T, base string, tokens map[string]string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post(base+"/api/session", "application/json", strings.NewReader(`{"token":"`+tokens["viewer"]+`","name":"v"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "fluxd_session" {
			cookie = ck
		}
	}
	if resp.StatusCode != 200 || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || strings.Contains(cookie.Value, tokens["viewer"]) {
		t.Fatalf("sign-in: %s, cookie %+v", resp.Status, cookie)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	call := func(method, body string, hdr map[string]string) int {
		req, _ := http.NewRequest("POST", base+"/api/fluxd.v1.FluxService/"+method, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	cookieHdr := map[string]string{"Cookie": "fluxd_session=" + cookie.Value}
	if code := call("ListServices", "{}", cookieHdr); code != http.StatusForbidden {
		t.Errorf("a cookie call without the CSRF token: %d, want 403", code)
	}
	if code := call("ListServices", "{}", map[string]string{"Authorization": "Bearer " + tokens["viewer"]}); code != 200 {
		t.Errorf("a viewer's bearer call of ListServices: %d, want 200", code)
	}
	if code := call("Lock", `{"service":"default:deployment/webapp","message":"x"}`, map[string]string{"Authorization": "Bearer " + tokens["viewer"]}); code != http.StatusForbidden {
		t.Errorf("a viewer's Lock through the web API: %d, want 403 (PermissionDenied)", code)
	}
	if code := call("ListServices", "{}", map[string]string{"Authorization": "Bearer fxd_forged"}); code != http.StatusUnauthorized {
		t.Errorf("a forged token: %d, want 401", code)
	}
	req, _ := http.NewRequest("POST", base+"/api/session", strings.NewReader(`{"token":"`+tokens["viewer"]+`"}`))
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("a sign-in from another origin: %v %v, want 403", resp, err)
	}
	// The event stream answers a bearer token, as text/event-stream.
	ereq, _ := http.NewRequest("GET", base+"/api/events", nil)
	ereq.Header.Set("Authorization", "Bearer "+tokens["viewer"])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	eresp, err := c.Do(ereq.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, _ := eresp.Body.Read(buf)
	eresp.Body.Close()
	if ct := eresp.Header.Get("Content-Type"); ct != "text/event-stream" || !strings.Contains(string(buf[:n]), "event: hello") {
		t.Errorf("events: %s %q", ct, buf[:n])
	}
}

// screenshotDir is the test's artifact directory.
func screenshotDir(t *testing.T) string {
	dir := t.ArtifactDir()
	t.Logf("screenshots in %s (kept with go test -artifacts)", dir)
	return dir
}

// saveScreenshot writes a screenshot to dir, and to docs/images for the
// README when FLUXD_UPDATE_SCREENSHOTS is set.
func saveScreenshot(dir, name string, b []byte) error {
	if err := os.WriteFile(filepath.Join(dir, name+".png"), b, 0o644); err != nil {
		return err
	}
	if os.Getenv("FLUXD_UPDATE_SCREENSHOTS") != "" {
		root, err := localstack.ModuleRoot()
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, "docs", "images", "web-"+name+".png"), b, 0o644)
	}
	return nil
}
