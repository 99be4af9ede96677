package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/localstack"
)

// TestPipelinesPageInBrowser runs the promotion e2e's pipeline (dev →
// staging → prod, prod waiting for one approval) with the status page,
// and uses the page as a person would: the Pipelines view draws the three
// stages left to right with arrows along 'from', each with its bundle and
// state; a release to dev shows up on prod as a bundle awaiting approval
// without a reload; a deployer approves it from the page, the plan shown
// first, and prod's Deployment then runs the new image; it promotes an
// older bundle by hand (picked, planned, confirmed), which pauses prod,
// and resumes prod from the page. A viewer sees the
// stages and no action, and the server refuses a viewer's approval made
// through the page's session.
func TestPipelinesPageInBrowser(t *testing.T) {
	sharedFluxd(t) // the stack
	const prefix = "pp1-"
	checkURL, _ := healthz(t)
	webAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	img, env := promoSetup(t, prefix, promoPipeline(prefix, checkURL), "--web-listen="+webAddr)
	base := "http://" + webAddr
	deployerToken := strings.TrimPrefix(env[1], "FLUX_TOKEN=")
	// A viewer of the same instance: added to the tokens file, which
	// fluxd reads again when it changes.
	viewerToken, err := auth.Create(filepath.Join(stack.Dir, "fluxd-pp1-tokens"), auth.Identity{Instance: instance, Role: auth.Viewer})
	if err != nil {
		t.Fatal(err)
	}
	// fluxd reads the Pipeline shortly after it starts: until then
	// 'fluxctl stages' says there is none (which promoStages takes as
	// a failure).
	if err := poll(context.Background(), time.Minute, func() error {
		if out, stderr, code := fluxctl(t, env, "stages", "-o", "json"); code != 0 {
			return fmt.Errorf("fluxctl stages: exit %d\n%s%s", code, out, stderr)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	m := waitStages(t, env, "the running images become verified bundles", 2*time.Minute, func(m map[string]promoStage) error {
		for _, st := range []string{"dev", "staging", "prod"} {
			if err := stageIs(st, "verified")(m); err != nil {
				return err
			}
		}
		return nil
	})
	b0 := m["prod"].Current.Bundle

	p := openStatusPage(t, base, deployerToken)
	var consoleMu sync.Mutex
	var consoleProblems []string
	go func() {
		for msg, err := range chromedp.Console(p.ctx) {
			if err != nil {
				return
			}
			if msg.IsException() || strings.Contains(msg.Text, "Content Security Policy") || strings.Contains(msg.Text, "Refused to") {
				consoleMu.Lock()
				consoleProblems = append(consoleProblems, msg.String())
				consoleMu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		consoleMu.Lock()
		defer consoleMu.Unlock()
		for _, pr := range consoleProblems {
			t.Errorf("the page's console: %s", pr)
		}
	})
	stage := func(name string) string { return `#pipelines .stage[data-stage="` + name + `"]` }
	browse(t, p.ctx, "open the Pipelines view from the navigation",
		chromedp.Click(chromedp.CSS(`#nav a[data-nav="pipelines"]`)),
		chromedp.WaitVisible(chromedp.CSS(stage("prod"))),
		waitText(stage("dev")+" .stage-bundle", "verified"),
		waitText(stage("staging")+" .stage-bundle", "verified"),
		waitText(stage("prod")+" .stage-bundle", b0[:12]),
		waitText(stage("prod")+" .stage-gates", "approvals 0/1"),
		waitText(stage("staging")+" .stage-gates", "checks"),
		p.shot("pipelines"))

	// Count the stream's promotion events, to show below that fluxd sends
	// them (the view also reads its stages every 15 s, which alone would
	// pass the waits).
	browse(t, p.ctx, "count the promotion events",
		chromedp.Evaluate[chromedp.Void](`import('/static/state.js').then(({S}) => { window.promotionEvents = 0; S.es.addEventListener('promotion', () => { window.promotionEvents++; }); })`, chromedp.EvalAwaitPromise))

	// The graph: left to right in the order of 'from', an arrow for each.
	layout := value(t, p.ctx, chromedp.Evaluate[string](`(() => {
		const r = (s) => document.querySelector('#pipelines .stage[data-stage="' + s + '"]').getBoundingClientRect();
		const arrows = Array.from(document.querySelectorAll('#pipelines svg.stage-arrows path.arrow')).map((a) => a.dataset.from + '>' + a.dataset.to).sort().join(',');
		return [r('dev').right < r('staging').left, r('staging').right < r('prod').left, arrows].join(' ');
	})()`))
	if layout != "true true dev>staging,staging>prod" {
		t.Errorf("the graph's layout (dev left of staging, staging left of prod, arrows): %q", layout)
	}

	// A release to dev: fluxd promotes it to staging, and prod waits for
	// an approval. The page shows it as it happens, with no reload.
	releaseNoWait(t, env, "--service", prefix+"dev:deployment/web", "--update-image", img+"1.1.0")
	m = waitStages(t, env, "prod awaits an approval of staging's verified bundle", 4*time.Minute, func(m map[string]promoStage) error {
		if err := stageIs("staging", "verified")(m); err != nil {
			return err
		}
		if len(m["prod"].Waiting) != 1 || m["prod"].Waiting[0].Status != "awaiting approval" {
			return fmt.Errorf("prod waits for %+v", m["prod"].Waiting)
		}
		return nil
	})
	b1 := m["prod"].Waiting[0].Bundle
	if got := deploymentImage(t, prefix+"prod"); got != img+"1.0.0" {
		t.Fatalf("prod runs %s before its approval", got)
	}
	waiting := stage("prod") + ` .stage-waiting li[data-bundle="` + b1 + `"]`
	browse(t, p.ctx, "the page shows prod's bundle awaiting approval",
		waitText(stage("staging")+" .stage-bundle", b1[:12]),
		waitText(waiting, "awaiting approval"),
		p.shot("pipelines-awaiting"))
	if n := value(t, p.ctx, chromedp.Evaluate[int](`window.promotionEvents`)); n == 0 {
		t.Errorf("the page's event stream carried no promotion event while dev's bundle went to staging and awaited approval in prod")
	}

	// Approve from the page: the promotion's plan first, then the
	// approval; fluxd promotes the bundle into prod.
	browse(t, p.ctx, "approve the waiting bundle on prod",
		chromedp.Click(chromedp.CSS(waiting+" button.approve")),
		chromedp.WaitVisible(chromedp.ID("approve-dialog")),
		waitText(`#approve-dialog table`, img+"1.1.0"),
		waitText(`#approve-dialog table`, prefix+"prod:deployment/web"),
		p.shot("pipelines-approve-plan"),
		chromedp.Click(chromedp.ID("confirm-approve")),
		chromedp.WaitNotPresent(chromedp.ID("approve-dialog")))
	runsImage(t, prefix+"prod", img+"1.1.0", 3*time.Minute)
	browse(t, p.ctx, "the page shows prod on the approved bundle",
		waitText(stage("prod")+" .stage-bundle", b1[:12]),
		waitText(stage("prod")+" .stage-bundle", "verified"),
		p.shot("pipelines-approved"))
	if types := historyTypes(t, env, prefix+"prod:deployment/web"); !containsAll(types, "awaiting-approval", "approved", "promoted") {
		t.Errorf("prod's history types %v lack the approval from the page", types)
	}

	// A promotion by hand of the older b0 into prod, from the page: the
	// bundle picked, its plan shown, confirmed; it pauses automatic
	// promotion into prod, and the page resumes it, its plan shown first.
	browse(t, p.ctx, "promote the older bundle into prod",
		chromedp.Click(chromedp.CSS(stage("prod")+" button.promote")),
		chromedp.WaitVisible(chromedp.ID("pick-dialog")),
		chromedp.Click(chromedp.ID("bundle-"+b0)),
		chromedp.Click(chromedp.ID("pick-bundle")),
		chromedp.WaitVisible(chromedp.ID("promote-dialog")),
		waitText(`#promote-dialog table`, img+"1.0.0"),
		p.shot("pipelines-promote-plan"),
		chromedp.Click(chromedp.ID("confirm-promote")),
		chromedp.WaitVisible(chromedp.ID("job-state")))
	runsImage(t, prefix+"prod", img+"1.0.0", 3*time.Minute)
	browse(t, p.ctx, "prod is paused by the promotion by hand",
		chromedp.Click(chromedp.CSS(`#nav a[data-nav="pipelines"]`)),
		waitText(stage("prod")+" .stage-paused", "Paused"),
		waitText(stage("prod")+" .stage-bundle", b0[:12]),
		p.shot("pipelines-paused"),
		chromedp.Click(chromedp.CSS(stage("prod")+" button.resume")),
		chromedp.WaitVisible(chromedp.ID("resume-dialog")),
		p.shot("pipelines-resume-plan"),
		chromedp.Click(chromedp.ID("confirm-resume")),
		chromedp.WaitNotPresent(chromedp.ID("resume-dialog")),
		chromedp.WaitNotPresent(chromedp.CSS(stage("prod")+" .stage-paused")))
	if m := promoStages(t, env); m["prod"].Paused != nil {
		t.Errorf("prod still paused after the page's resume: %+v", m["prod"].Paused)
	}
	// Resumed, prod goes forward again to b1, verified there before.
	runsImage(t, prefix+"prod", img+"1.1.0", 3*time.Minute)

	// A viewer sees the stages and no action; the server refuses an
	// approval made with a viewer's session.
	browse(t, p.ctx, "sign out, and in as a viewer",
		chromedp.Click(chromedp.ID("signout")),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), viewerToken),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS(`#nav a[data-nav="pipelines"]`)),
		chromedp.Click(chromedp.CSS(`#nav a[data-nav="pipelines"]`)),
		waitText(stage("prod")+" .stage-bundle", b1[:12]),
		waitText(stage("prod"), "view only"))
	buttons := value(t, p.ctx, chromedp.Evaluate[int](`document.querySelectorAll('#pipelines button').length`))
	if buttons != 0 {
		t.Errorf("a viewer's Pipelines view has %d buttons, want none", buttons)
	}
	refusal := value(t, p.ctx, chromedp.Evaluate[string](`(async () => {
		const {api} = await import('/static/api.js');
		try { await api('Approve', {stage: 'prod'}); return 'accepted'; } catch (e) { return e.status + ' ' + e.message; }
	})()`, chromedp.EvalAsValue, chromedp.EvalAwaitPromise))
	if !strings.HasPrefix(refusal, "403 ") {
		t.Errorf("a viewer's approval through the page: %q, want refused (403)", refusal)
	}
}
