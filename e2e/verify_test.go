package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/fluxd/fluxd/internal/cosigntest"
	"github.com/fluxd/fluxd/internal/localstack"
)

// TestReleaseRefusesUnsignedImages: a fluxd started with --verify-config
// requiring a cosign key for one repository of the stack's registry. A
// release by hand of an unsigned image is refused, and so is one signed
// by another key (--force or not); a deployer's --allow-unverified is
// refused; --update-all-images plans the newest signed image, shows its
// verification and says which newer image it skipped and why; the signed
// image is released, into git and the cluster, by hand and by the
// automator, whose warnings (list-services) name the unsigned newer one.
func TestReleaseRefusesUnsignedImages(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	kc := kubeClient(t)
	const app, dir = "verapp", "verify-e2e"
	repo := stack.Registry + "/" + app
	ci, err := cosigntest.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	other, err := cosigntest.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	sign := func(s *cosigntest.Signer, tag string) {
		t.Helper()
		d, err := name.NewDigest(repo+"@"+digestOf(t, ctx, app, tag), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Sign(d); err != nil {
			t.Fatal(err)
		}
	}
	for i, tag := range []string{"1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0"} {
		if err := stack.PushImage(ctx, app, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	sign(ci, "1.0.0")
	// 1.1.0 unsigned; 1.2.0 signed by a key the config does not name;
	// 1.3.0 signed; 1.4.0, the newest, unsigned.
	sign(other, "1.2.0")
	sign(ci, "1.3.0")

	cfgDir := t.TempDir()
	if err := ci.WritePublicKey(filepath.Join(cfgDir, "cosign.pub")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(cfgDir, "verify.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n- name: signed\n  keys: [cosign.pub]\nrepositories:\n- match: "+repo+"\n  profile: signed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path, autoPath := dir+"/"+app+".yaml", dir+"/verauto.yaml"
	pushManifest(t, "Add "+app, map[string]string{
		path: policyDeployment(app, repo+":1.0.0", map[string]string{"fluxd.io/tag-all": "semver:*"}),
		// Automated from the start: the automator's first check
		// releases the newest image that verifies.
		autoPath: policyDeployment("verauto", repo+":1.0.0", map[string]string{"fluxd.io/tag-all": "semver:*", "fluxd.io/automated": "true", "fluxd.io/automated-by": instance}),
	})
	t.Cleanup(func() { removeManifest(t, path, app); removeManifest(t, autoPath, "verauto") })
	// A webhook receiver of category automation: the automator's skip of
	// the unsigned 1.4.0 is told of.
	recv := newTestReceivers(t)
	recv.setUp(true)
	if err := os.WriteFile(filepath.Join(cfgDir, "hook-key"), []byte("e2e-verify-hook-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	notifyCfg := filepath.Join(cfgDir, "notify.yaml")
	if err := os.WriteFile(notifyCfg, []byte(fmt.Sprintf("receivers:\n  - {name: auto, type: webhook, url: %s/auto, secretFile: %s, events: [automation], timeout: 2s}\n",
		recv.srv.URL, filepath.Join(cfgDir, "hook-key"))), 0o600); err != nil {
		t.Fatal(err)
	}
	metrics, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	webAddr, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	f := startFaultFluxd(t, "fluxd-verify", dir, nil, "--verify-config="+cfg, "--notify-config="+notifyCfg, "--metrics-listen="+metrics, "--web-listen="+webAddr)
	admin := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["admin"], "USER=ada"}
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	svc := "default:deployment/" + app

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"unsigned", deployer, []string{"-i", repo + ":1.1.0"}, []string{"does not pass signature verification", "is unsigned"}},
		{"another key's, with --force", deployer, []string{"-i", repo + ":1.2.0", "--force"}, []string{"does not pass signature verification", "failed (wrong-key)", "--allow-unverified"}},
		{"a deployer's --allow-unverified", deployer, []string{"-i", repo + ":1.1.0", "--allow-unverified"}, []string{"--allow-unverified needs the admin role; your token's role is deployer"}},
	} {
		out, stderr, code := fluxctl(t, tc.env, append([]string{"release", "-s", svc, "-y"}, tc.args...)...)
		for _, w := range tc.want {
			if code == 0 || !strings.Contains(stderr+out, w) {
				t.Errorf("%s: exit %d, want it refused saying %q:\n%s%s", tc.name, code, w, out, stderr)
			}
		}
	}

	out, stderr, code := fluxctl(t, admin, "release", "-s", svc, "--update-all-images", "--dry-run")
	if code != 0 || !strings.Contains(out, "Container app: "+repo+":1.0.0 -> 1.3.0") ||
		!strings.Contains(out, "Signature: profile signed: verified by key "+ci.ID()) ||
		!strings.Contains(out, "Warning: app: skipped newer images that do not pass signature verification: "+repo+":1.4.0 (unsigned") {
		t.Fatalf("--update-all-images --dry-run: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := fluxctl(t, deployer, "release", "-s", svc, "--update-all-images", "-y"); code != 0 {
		t.Fatalf("release --update-all-images: exit %d\n%s%s", code, out, stderr)
	}
	// By hand and by the automator alike: 1.3.0, not the newer unsigned
	// 1.4.0, in git and in the cluster.
	waitRolledOut(t, kc, map[string][]string{app: {"app=" + repo + ":1.3.0"}, "verauto": {"app=" + repo + ":1.3.0"}})
	for _, p := range []string{path, autoPath} {
		if y := gitShowRemote(t, p); !strings.Contains(y, "image: "+repo+":1.3.0") {
			t.Errorf("%s in the remote:\n%s", p, y)
		}
	}
	// The automator says which newer image it skipped, and why.
	out, stderr, code = fluxctl(t, admin, "list-services", "-o", "json")
	var services []struct {
		ID       string
		Warnings []string
	}
	if err := json.Unmarshal([]byte(out), &services); code != 0 || err != nil {
		t.Fatalf("list-services -o json: exit %d, %v\n%s%s", code, err, out, stderr)
	}
	found := false
	for _, s := range services {
		if s.ID == "default:deployment/verauto" {
			found = strings.Contains(strings.Join(s.Warnings, "\n"), "skipped newer images that do not pass signature verification: "+repo+":1.4.0 (unsigned")
			if !found {
				t.Errorf("verauto's warnings %q do not name the unsigned 1.4.0 it skipped", s.Warnings)
			}
		}
	}
	if !found {
		t.Errorf("list-services shows no verauto with the warning:\n%s", out)
	}

	// The receiver was told once of the automator's skip of 1.4.0, in
	// category automation.
	var skips []string
	if err := poll(ctx, 30*time.Second, func() error {
		skips = skips[:0]
		for _, h := range recv.delivered("/auto") {
			var m struct {
				Kind     string
				Services []string
				Message  string
			}
			if err := json.Unmarshal(h.Body, &m); err != nil {
				return err
			}
			if m.Kind == "automation.unverified-skipped" {
				skips = append(skips, strings.Join(m.Services, ",")+" "+m.Message)
			}
		}
		if len(skips) == 0 {
			return fmt.Errorf("no automation.unverified-skipped delivered yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(skips) != 1 || !strings.Contains(skips[0], "default:deployment/verauto") || !strings.Contains(skips[0], repo+":1.4.0 (sha256:") || !strings.Contains(skips[0], "unsigned") {
		t.Errorf("automation.unverified-skipped notices %q, want one naming verauto's unsigned %s:1.4.0 and its digest", skips, repo)
	}

	// list-images says each image's verification, as the release saw it.
	out, stderr, code = fluxctl(t, deployer, "list-images", svc, "-o", "json")
	var listed []struct {
		Container string
		Images    []struct {
			Tag          string
			Verification *struct{ Outcome, Detail string }
		}
	}
	if err := json.Unmarshal([]byte(out), &listed); code != 0 || err != nil || len(listed) != 1 {
		t.Fatalf("list-images -o json: exit %d, %v\n%s%s", code, err, out, stderr)
	}
	want := map[string]string{"1.4.0": "unsigned", "1.3.0": "verified", "1.2.0": "failed", "1.1.0": "unsigned", "1.0.0": "verified"}
	for _, img := range listed[0].Images {
		v := img.Verification
		if strings.HasSuffix(img.Tag, ".sig") {
			if v != nil {
				t.Errorf("list-images verified cosign's signature tag %s: %+v", img.Tag, v)
			}
			continue
		}
		if v == nil || v.Outcome != want[img.Tag] {
			t.Errorf("list-images: %s's verification is %+v, want %s", img.Tag, v, want[img.Tag])
			continue
		}
		if img.Tag == "1.3.0" && !strings.Contains(v.Detail, ci.ID()) {
			t.Errorf("list-images: 1.3.0 verified by %q, want the key %s", v.Detail, ci.ID())
		}
		delete(want, img.Tag)
	}
	if len(want) > 0 {
		t.Errorf("list-images shows no %v:\n%s", want, out)
	}
	if out, stderr, code := fluxctl(t, deployer, "list-images", svc); code != 0 || !strings.Contains(out, "VERIFIED") || !strings.Contains(out, "verified (key "+ci.ID()) {
		t.Errorf("list-images: exit %d, want a VERIFIED column naming the key:\n%s%s", code, out, stderr)
	}
	// What it cost, as the metrics say: signature lookups counted apart,
	// and the verified 1.3.0, which the releases verified, answered from
	// the cache by the listings after them.
	if n := metricWith(t, metrics, "fluxd_registry_signature_requests_total"); n == 0 {
		t.Error("fluxd_registry_signature_requests_total counts no signature lookup")
	}
	if n := metricWith(t, metrics, "fluxd_verify_results_total", `source="registry"`, `outcome="verified"`); n == 0 {
		t.Error("fluxd_verify_results_total counts no verification made with the registry")
	}
	if n := metricWith(t, metrics, "fluxd_verify_results_total", `source="memory"`, `outcome="verified"`); n == 0 {
		t.Error("fluxd_verify_results_total counts no verified result answered from the cache")
	}

	// The history keeps the released image's verification, as data.
	out, stderr, code = fluxctl(t, deployer, "history", svc, "-o", "json")
	var events []struct {
		Type    string
		Changes []struct {
			To           string
			Verification *struct{ Outcome, Digest, Detail string }
		}
	}
	if err := json.Unmarshal([]byte(out), &events); code != 0 || err != nil {
		t.Fatalf("history -o json: exit %d, %v\n%s%s", code, err, out, stderr)
	}
	var released []string
	for _, ev := range events {
		if ev.Type != "release" {
			continue
		}
		for _, c := range ev.Changes {
			if v := c.Verification; v != nil {
				released = append(released, c.To+" "+v.Outcome+" "+v.Digest+" "+v.Detail)
			}
		}
	}
	if wantRel := repo + ":1.3.0 verified " + digestOf(t, ctx, app, "1.3.0") + " profile signed: verified by key " + ci.ID(); len(released) != 1 || !strings.HasPrefix(released[0], wantRel) {
		t.Errorf("the history's released images with their verification: %q, want one starting %q\n%s", released, wantRel, out)
	}

	// The status page shows each image's verification, and the released
	// image's in the service's history.
	bctx, shot := newBrowser(t, 1400, 1000)
	browse(t, bctx, "sign in",
		chromedp.Navigate("http://"+webAddr+"/#/service/"+url.PathEscape(svc)),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), f.Tokens["deployer"]),
		chromedp.SendKeys(chromedp.ID("name"), "Erin"),
		chromedp.KeyEvent(kb.Enter),
		waitText(`table[aria-label="Images of app"] tr[data-tag="1.3.0"] td.signature`, "verified by key "+ci.ID()[:19]+"…"),
		waitText(`#history .change .badge.signature`, "verified by key "+ci.ID()[:19]+"…"),
		shot("service-images-signatures"))
	sigs := value(t, bctx, chromedp.Evaluate[map[string]string](`Object.fromEntries(Array.from(document.querySelectorAll('table[aria-label="Images of app"] tr[data-tag]')).map((tr) => [tr.dataset.tag, tr.querySelector('td.signature').textContent]))`))
	for tag, w := range map[string]string{"1.4.0": "unsigned", "1.2.0": "failed: wrong-key", "1.1.0": "unsigned", "1.0.0": "verified by key"} {
		if !strings.HasPrefix(sigs[tag], w) {
			t.Errorf("the page's Signature of %s is %q, want %q…", tag, sigs[tag], w)
		}
	}
}
