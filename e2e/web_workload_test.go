package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/localstack"
)

// One workload on the status page, in a real browser on the real stack,
// on a desktop and on a phone: its resource tree (the ReplicaSet, the
// pods with their status and restarts, their events), a pod's log (on
// kwok's fake nodes there is none: the page says why), its manifest in
// git beside the live object with what applying git would change (for a
// viewer, without the live object or the diff's values), and a
// deployer's actions: automate and deautomate, tag filters (a bad one
// refused with nothing committed), a release with a message, a rollback
// to the previous image, and release all with its plan first. Each
// action is checked where a user would look: the commit in the remote,
// the image in the Deployment, the history row.
func TestStatusPageWorkloadInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	img := faultService(t, "web-tree", "treeapp", 2, 0, "1.1.0", "1.2.0")
	webAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	f := startFaultFluxd(t, "fluxd-web-tree", "web-tree", nil, "--web-listen="+webAddr, "--rollout-timeout=1m")
	base := "http://" + webAddr
	waitHTTP(t, base+"/")
	deployer := []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"]}
	const id = "default:deployment/treeapp"
	page := base + "/#/service/default%3Adeployment%2Ftreeapp"

	// Logs need the deployer role: a viewer's call is refused by the
	// API's own role check, a deployer's reaches the cluster.
	if code, body := apiCall(t, base, f.Tokens["viewer"], "GetPodLog", `{"service":"`+id+`","pod":"x"}`); code != http.StatusForbidden {
		t.Errorf("a viewer's GetPodLog: %d %s, want 403", code, body)
	}
	if code, body := apiCall(t, base, f.Tokens["viewer"], "GetResources", `{"service":"`+id+`"}`); code != http.StatusOK || !strings.Contains(body, `"pods"`) {
		t.Errorf("a viewer's GetResources: %d %s, want 200 with pods", code, body)
	}
	if code, body := apiCall(t, base, f.Tokens["deployer"], "GetPodLog", `{"service":"`+id+`","pod":"not-its-pod"}`); code != http.StatusNotFound {
		t.Errorf("a deployer's GetPodLog of a pod that is not the service's: %d %s, want 404", code, body)
	}

	ctx, shot := newBrowser(t, 1400, 1000)
	browse(t, ctx, "sign in",
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), f.Tokens["deployer"]),
		chromedp.SendKeys(chromedp.ID("name"), "Tree Tester"),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#pods tbody tr`)))

	// The tree: one ReplicaSet running 1.0.0, its two pods Running and
	// ready, and the controllers' events.
	browse(t, ctx, "the resource tree",
		waitText(`#owned`, img+"1.0.0"),
		waitText(`#owned`, "2/2"),
		waitText(`#events`, "ScalingReplicaSet"),
		waitText(`#manifest-git`, "image: "+img+"1.0.0"),
		shot("service-resources"))
	pods := value(t, ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#pods tbody tr')).map((tr) => tr.dataset.pod + ' ' + tr.children[1].textContent + ' ' + tr.children[2].textContent)`))
	if len(pods) != 2 {
		t.Fatalf("pods on the page: %q, want 2", pods)
	}
	for _, p := range pods {
		if !strings.HasPrefix(p, "treeapp-") || !strings.Contains(p, "Running ready 0") {
			t.Errorf("a pod row says %q, want treeapp-… Running ready 0 (restarts)", p)
		}
	}
	rs, err := kubeClient(t).AppsV1().ReplicaSets("default").List(context.Background(), metav1.ListOptions{LabelSelector: "app=treeapp"})
	if err != nil || len(rs.Items) != 1 {
		t.Fatalf("ReplicaSets of treeapp: %v %v", rs, err)
	}
	if owned := value(t, ctx, chromedp.Text(chromedp.CSS(`#owned tbody`))); !strings.Contains(owned, rs.Items[0].Name) {
		t.Errorf("the page's ReplicaSets %q lack %s", owned, rs.Items[0].Name)
	}

	// A pod's log: kwok's fake nodes run no containers and serve no
	// logs, and the page says so instead of showing an empty log.
	browse(t, ctx, "a pod's log on a fake node",
		chromedp.Click(chromedp.CSS(`#pods tbody tr button[aria-label^="Log of treeapp-"]`)),
		chromedp.WaitVisible(chromedp.ID("pod-log-box")),
		waitText(`#pod-log-note`, "did not serve its log"),
		shot("service-pod-log-kwok"))

	// The manifest: git and the cluster agree; scaled by hand, the page
	// shows what applying git would change, and the live object.
	if m := value(t, ctx, chromedp.Text(chromedp.ID("manifest-action"))); m != "unchanged" {
		t.Errorf("the manifest's comparison says %q, want unchanged", m)
	}
	if out, stderr, code := run(t, []string{"KUBECONFIG=" + stack.Kubeconfig}, stackBinDir(t)+"/kubectl", "scale", "deployment/treeapp", "--replicas=3", "-n", "default"); code != 0 {
		t.Fatalf("kubectl scale: %s%s", out, stderr)
	}
	browse(t, ctx, "the manifest drifted",
		chromedp.Click(chromedp.ID("manifest-refresh")),
		waitText(`#manifest-action`, "configured"),
		waitText(`#manifest-diff`, "replace /spec/replicas: 2"),
		waitText(`#manifest-live`, "replicas: 3"),
		shot("service-manifest"))
	if n := deploymentReplicas(t, "treeapp"); n != 3 {
		t.Errorf("the comparison (a dry run) changed the Deployment: %d replicas, want 3", n)
	}
	// A value set outside git (an annotation, as 'kubectl set env' sets
	// an environment variable, without a rollout) is in the live object:
	// a deployer reads it; a viewer gets no live object and the diff's
	// paths without their values, and the answer says so.
	kubectl := func(args ...string) {
		t.Helper()
		if out, stderr, code := run(t, []string{"KUBECONFIG=" + stack.Kubeconfig}, stackBinDir(t)+"/kubectl", append(args, "-n", "default")...); code != 0 {
			t.Fatalf("kubectl %s: %s%s", strings.Join(args, " "), out, stderr)
		}
	}
	kubectl("annotate", "deployment/treeapp", "example.com/db-password=hunter2")
	manifest := func(role string) (resp struct {
		Live     string   `json:"live"`
		Diff     []string `json:"diff"`
		Redacted bool     `json:"redacted"`
	}, body string) {
		t.Helper()
		code, body := apiCall(t, base, f.Tokens[role], "GetManifest", `{"service":"`+id+`"}`)
		if code != http.StatusOK {
			t.Fatalf("a %s's GetManifest: %d %s", role, code, body)
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatalf("a %s's GetManifest: %v in %s", role, err, body)
		}
		return resp, body
	}
	if m, body := manifest("deployer"); m.Redacted || !strings.Contains(m.Live, "hunter2") || !strings.Contains(m.Live, "replicas: 3") ||
		!strings.Contains(strings.Join(m.Diff, "\n"), "replace /spec/replicas: 2") {
		t.Errorf("a deployer's manifest lacks the live object or the diff's values: %s", body)
	}
	if m, body := manifest("viewer"); !m.Redacted || m.Live != "" || strings.Contains(body, "hunter2") || strings.Contains(body, "replicas: 3") ||
		!slices.Contains(m.Diff, "replace /spec/replicas") || slices.ContainsFunc(m.Diff, func(l string) bool { return strings.Contains(l, ": ") }) {
		t.Errorf("a viewer's manifest: %s; want it redacted: no live object, the diff's paths alone (replace /spec/replicas)", body)
	}
	// The page, signed in as a viewer, says why there is no live object.
	vctx, _ := newBrowser(t, 1400, 1000)
	browse(t, vctx, "a viewer's manifest",
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), f.Tokens["viewer"]),
		chromedp.KeyEvent(kb.Enter),
		waitText(`#manifest-live-redacted`, "Shown to deployers and admins only"),
		waitText(`#manifest-diff`, "replace /spec/replicas"))
	if text := value(t, vctx, chromedp.Text(chromedp.CSS(`body`))); strings.Contains(text, "hunter2") || strings.Contains(text, "/spec/replicas: 2") {
		t.Errorf("a viewer's page shows what the cluster holds beyond git:\n%s", text)
	}
	kubectl("annotate", "deployment/treeapp", "example.com/db-password-")
	if out, stderr, code := run(t, []string{"KUBECONFIG=" + stack.Kubeconfig}, stackBinDir(t)+"/kubectl", "scale", "deployment/treeapp", "--replicas=2", "-n", "default"); code != 0 {
		t.Fatalf("kubectl scale: %s%s", out, stderr)
	}

	// Policy: a bad tag filter is refused in the dialog and nothing is
	// committed; a filter that admits nothing newer (so that the
	// automator, kicked by the change, has nothing to release); automate;
	// deautomate; the filter the rest of the test releases under.
	head := remoteHead(t)
	browse(t, ctx, "a bad tag filter",
		chromedp.Click(chromedp.ID("edit-filters")),
		chromedp.WaitVisible(chromedp.ID("filter-app")),
		chromedp.SetValue(chromedp.ID("filter-app"), "semver:>>>1"),
		chromedp.Click(chromedp.ID("save-filters")),
		waitText(`#filters-error`, "semver"),
		shot("service-filter-refused"))
	if h := remoteHead(t); h != head {
		t.Errorf("a refused filter moved the remote from %s to %s", head, h)
	}
	browse(t, ctx, "a tag filter, then automate",
		chromedp.SetValue(chromedp.ID("filter-app"), "semver:~1.0"),
		chromedp.Click(chromedp.ID("save-filters")),
		chromedp.WaitNotPresent(chromedp.ID("filters-dialog")),
		waitText(`#service-actions`, "semver:~1.0"),
		chromedp.Click(chromedp.CSS(`button[aria-label="Automate `+id+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[aria-label="Deautomate `+id+`"]`)))
	if m := gitShow(t, "web-tree/treeapp.yaml"); !strings.Contains(m, `fluxd.io/automated: "true"`) || !strings.Contains(m, `fluxd.io/tag.app: "semver:~1.0"`) {
		t.Errorf("after a filter and Automate on the page, git has:\n%s", m)
	}
	browse(t, ctx, "deautomate, and a filter for what follows",
		chromedp.Click(chromedp.CSS(`button[aria-label="Deautomate `+id+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[aria-label="Automate `+id+`"]`)),
		chromedp.Click(chromedp.ID("edit-filters")),
		chromedp.WaitVisible(chromedp.ID("filter-app")),
		chromedp.SetValue(chromedp.ID("filter-app"), "semver:~1.1"),
		chromedp.Click(chromedp.ID("save-filters")),
		waitText(`#service-actions`, "semver:~1.1"))
	if m := gitShow(t, "web-tree/treeapp.yaml"); !strings.Contains(m, `fluxd.io/tag.app: "semver:~1.1"`) || strings.Contains(m, `fluxd.io/automated: "true"`) {
		t.Errorf("after Deautomate and the filter, git has:\n%s", m)
	}
	if got := images(t, kubeClient(t))["treeapp"]; strings.Join(got, ",") != "app="+img+"1.0.0" {
		t.Errorf("after the policy changes, treeapp runs %v, want 1.0.0 still", got)
	}

	// A release from the service's images with a message: the commit,
	// the Deployment and the history say it.
	browse(t, ctx, "a release with a message",
		chromedp.WaitVisible(chromedp.CSS(`button[aria-label="Release `+img+`1.1.0"]`)),
		chromedp.Click(chromedp.CSS(`button[aria-label="Release `+img+`1.1.0"]`)),
		chromedp.WaitVisible(chromedp.ID("release-message")),
		chromedp.SendKeys(chromedp.ID("release-message"), "tree test release"),
		shot("plan-message"),
		chromedp.Click(chromedp.ID("confirm-release")),
		waitText(`#job-state`, "succeeded"))
	if got := images(t, kubeClient(t))["treeapp"]; strings.Join(got, ",") != "app="+img+"1.1.0" {
		t.Errorf("after the page's release, treeapp runs %v", got)
	}
	if out, _, _ := fluxctl(t, deployer, "history", id); !strings.Contains(out, "tree test release") {
		t.Errorf("the history lacks the release's message:\n%s", out)
	}
	if msg := remoteCommitMessage(t); !strings.Contains(msg, "tree test release") {
		t.Errorf("the release's commit message lacks the page's message:\n%s", msg)
	}

	// A rollback: the previous image, from the history, through a plan.
	browse(t, ctx, "a rollback",
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.ID("rollback")),
		waitText(`#history`, "Roll back to 1.0.0"),
		chromedp.Click(chromedp.ID("rollback")),
		chromedp.WaitVisible(chromedp.ID("confirm-release")),
		waitText(`#plan-dialog`, img+"1.1.0 → "+img+"1.0.0"),
		shot("rollback-plan"),
		chromedp.Click(chromedp.ID("confirm-release")),
		waitText(`#job-state`, "succeeded"))
	if got := images(t, kubeClient(t))["treeapp"]; strings.Join(got, ",") != "app="+img+"1.0.0" {
		t.Errorf("after the page's rollback, treeapp runs %v", got)
	}
	if out, _, _ := fluxctl(t, deployer, "history", id); !strings.Contains(out, "rollback to "+img+"1.0.0") {
		t.Errorf("the history lacks the rollback:\n%s", out)
	}

	// Release all: the plan first (every service to the newest image its
	// policy allows: 1.1.0 under semver:~1.1), then, confirmed, done.
	browse(t, ctx, "release all",
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/services'`, chromedp.EvalIgnoreExceptions),
		chromedp.WaitVisible(chromedp.CSS(`#services tr[data-service="`+id+`"]`)),
		chromedp.Click(chromedp.ID("release-all")),
		chromedp.WaitVisible(chromedp.ID("confirm-release")),
		waitText(`#plan-title`, "Release all"),
		waitText(`#plan-dialog`, img+"1.0.0 → "+img+"1.1.0"),
		shot("release-all-plan"))
	if got := images(t, kubeClient(t))["treeapp"]; strings.Join(got, ",") != "app="+img+"1.0.0" {
		t.Errorf("the plan of release all changed the Deployment: %v", got)
	}
	browse(t, ctx, "release all confirmed",
		chromedp.Click(chromedp.ID("confirm-release")),
		waitText(`#job-state`, "succeeded"))
	if got := images(t, kubeClient(t))["treeapp"]; strings.Join(got, ",") != "app="+img+"1.1.0" {
		t.Errorf("after release all, treeapp runs %v", got)
	}

	// On a phone: the tree's tables reflow into cards, git and the live
	// object stack, nothing is wider than the screen.
	browse(t, ctx, "on a phone",
		chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile),
		chromedp.Navigate(page),
		reloadPage(),
		chromedp.WaitVisible(chromedp.CSS(`#pods tbody tr`)),
		waitText(`#owned`, img+"1.1.0"),
		chromedp.WaitVisible(chromedp.ID("manifest-git")),
		shot("phone-service"))
	phone := value(t, ctx, chromedp.Evaluate[[]string](`(() => {
		const tr = document.querySelector('#pods tbody tr'), td = tr.querySelector('td:nth-child(2)');
		const g = document.getElementById('manifest-git').getBoundingClientRect(), l = document.getElementById('manifest-live').getBoundingClientRect();
		return [getComputedStyle(tr).display, getComputedStyle(td, '::before').content, String(document.documentElement.scrollWidth <= 390), String(l.top >= g.bottom)];
	})()`))
	if strings.Join(phone, "|") != `block|"Status"|true|true` {
		t.Errorf("the service on a phone (pod row display, the Status cell's label, page within 390 px, live below git): %q", phone)
	}
	browse(t, ctx, "a rollback on a phone",
		chromedp.Click(chromedp.ID("rollback")),
		chromedp.WaitVisible(chromedp.ID("confirm-release")),
		waitText(`#plan-dialog`, img+"1.1.0 → "+img+"1.0.0"),
		shot("phone-rollback-plan"),
		chromedp.Click(chromedp.ID("cancel-release")),
		chromedp.WaitNotPresent(chromedp.ID("plan-dialog")))
	if got := images(t, kubeClient(t))["treeapp"]; strings.Join(got, ",") != "app="+img+"1.1.0" {
		t.Errorf("a cancelled rollback changed the Deployment: %v", got)
	}
}

// apiCall posts a request to the page's JSON API with a bearer token, and
// returns the status code and body.
func apiCall(t *testing.T, base, token, method, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/api/fluxd.v1.FluxService/"+method, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// newBrowser starts headless chromium with a window of w×h; the page's
// console is watched (an exception or a Content-Security-Policy refusal
// fails the test), and shot saves screenshots as the other browser test
// does.
func newBrowser(t *testing.T, w, h int) (context.Context, func(string) chromedp.Action[chromedp.Void]) {
	t.Helper()
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium: run 'make deps' (hack/deps.sh installs Debian's chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(w, h),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	ctx, cancelC := context.WithTimeout(ctx, 6*time.Minute)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	var mu sync.Mutex
	var problems []string
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.IsException() || strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Refused to") {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		for _, p := range problems {
			t.Errorf("the page's console: %s", p)
		}
		mu.Unlock()
		cancelC()
		cancelB()
		cancelA()
	})
	shots := screenshotDir(t)
	return ctx, func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			b, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return saveScreenshot(shots, name, b)
		})
	}
}

// podLogOf reads a pod's log through the page's JSON API.
func podLogOf(t *testing.T, base, token, service, pod string) (int, []string, string) {
	t.Helper()
	code, body := apiCall(t, base, token, "GetPodLog", fmt.Sprintf(`{"service":%q,"pod":%q,"tailLines":50}`, service, pod))
	var r struct {
		Lines []string `json:"lines"`
	}
	_ = json.Unmarshal([]byte(body), &r)
	return code, r.Lines, body
}

// remoteCommitMessage is the message of the remote branch's newest commit.
func remoteCommitMessage(t *testing.T) string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "msg-clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	return gitCLI(t, clone, "log", "-1", "--format=%B")
}

// On the real node, a pod's log on the page is the container's own
// output: the page's JSON API (the call its Log button makes) returns the
// test program's first line, and a viewer is refused it.
func TestStatusPagePodLogOnRealNode(t *testing.T) {
	kc := requireRealNode(t)
	ctx := testContext(t)
	good, err := stack.PushAppImage(ctx, "logapp", "1.0.0", localstack.AppServe)
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.NewReplacer("realapp", "logapp", "NODE", localstack.RealNodeName, "TAINT", localstack.RealNodeTaint, "IMAGE", good).Replace(realAppManifest)
	pushManifest(t, "Add logapp", map[string]string{"web-log/logapp.yaml": manifest})
	kubectlApply(t, manifest)
	t.Cleanup(func() {
		_ = kc.AppsV1().Deployments("default").Delete(context.Background(), "logapp", metav1.DeleteOptions{})
	})
	waitRolledOut(t, kc, map[string][]string{"logapp": {"app=" + good}})
	webAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	f := startFaultFluxd(t, "fluxd-web-log", "web-log", nil, "--web-listen="+webAddr)
	base := "http://" + webAddr
	waitHTTP(t, base+"/")
	const id = "default:deployment/logapp"
	code, body := apiCall(t, base, f.Tokens["viewer"], "GetResources", `{"service":"`+id+`"}`)
	var res struct {
		Pods []struct {
			Name, Status string
			Ready        bool
		} `json:"pods"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil || len(res.Pods) != 1 || res.Pods[0].Status != "Running" || !res.Pods[0].Ready {
		t.Fatalf("the resources of logapp: %d %s", code, body)
	}
	pod := res.Pods[0].Name
	if code, _, body := podLogOf(t, base, f.Tokens["viewer"], id, pod); code != http.StatusForbidden {
		t.Errorf("a viewer's log of %s: %d %s, want 403", pod, code, body)
	}
	code, lines, body := podLogOf(t, base, f.Tokens["deployer"], id, pod)
	if code != http.StatusOK || len(lines) == 0 || !strings.Contains(lines[0], `testapp 1.0.0: mode "serve"`) {
		t.Errorf("the log of %s: %d %s", pod, code, body)
	}
}
