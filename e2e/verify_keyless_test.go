package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/fluxd/fluxd/internal/cosigntest"
)

// TestReleaseRefusesKeylessFromTheWrongSubject: a fluxd whose
// --verify-config requires, for one repository of the stack's registry,
// a keyless signature by a CI workflow of one organisation (the OIDC
// issuer exact, the subject by expression) under the trusted root of the
// test's CA and log. The stack's registry holds 1.0.0 and 1.1.0 signed by
// a release workflow of that organisation, and the newest, 1.2.0, signed
// by a workflow of another (a certificate the same CA issued, logged in
// the same log). A release by hand of 1.2.0 is refused, dry run or not,
// saying whose signature it is; --update-all-images plans 1.1.0, verified
// by the workflow, says why it skipped 1.2.0, and releases 1.1.0 into git
// and the cluster.
func TestReleaseRefusesKeylessFromTheWrongSubject(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	kc := kubeClient(t)
	const app, dir = "keylessapp", "verify-keyless-e2e"
	const issuer = "https://token.actions.githubusercontent.com"
	const release = "https://github.com/org/app/.github/workflows/release.yml@refs/heads/main"
	const stranger = "https://github.com/someone-else/app/.github/workflows/release.yml@refs/heads/main"
	repo := stack.Registry + "/" + app
	ca, err := cosigntest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		if err := stack.PushImage(ctx, app, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	sign := func(tag, subject string) {
		t.Helper()
		d, err := name.NewDigest(repo+"@"+digestOf(t, ctx, app, tag), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.SignKeyless(d, cosigntest.Keyless{Issuer: issuer, Subject: subject}); err != nil {
			t.Fatal(err)
		}
	}
	sign("1.0.0", release)
	sign("1.1.0", release)
	sign("1.2.0", stranger)

	cfgDir := t.TempDir()
	if err := ca.WriteTrustedRoot(filepath.Join(cfgDir, "trusted_root.json")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(cfgDir, "verify.yaml")
	if err := os.WriteFile(cfg, []byte(`profiles:
- name: ci
  keyless:
  - issuer: `+issuer+`
    subjectRegexp: ^https://github\.com/org/.*$
  trustedRoot: trusted_root.json
repositories:
- match: `+repo+`
  profile: ci
`), 0o600); err != nil {
		t.Fatal(err)
	}
	path := dir + "/" + app + ".yaml"
	pushManifest(t, "Add "+app, map[string]string{path: policyDeployment(app, repo+":1.0.0", map[string]string{"fluxd.io/tag-all": "semver:*"})})
	t.Cleanup(func() { removeManifest(t, path, app) })
	f := startFaultFluxd(t, "fluxd-keyless", dir, nil, "--verify-config="+cfg)
	admin := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["admin"], "USER=ada"}
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	svc := "default:deployment/" + app

	for _, args := range [][]string{{"--dry-run"}, {"-y", "--force"}} {
		out, stderr, code := fluxctl(t, deployer, append([]string{"release", "-s", svc, "-i", repo + ":1.2.0"}, args...)...)
		for _, w := range []string{"does not pass signature verification", "failed (wrong-identity)", `subject "` + stranger + `" of issuer "` + issuer + `"`} {
			if code == 0 || !strings.Contains(stderr+out, w) {
				t.Errorf("release %s %v: exit %d, want it refused saying %q:\n%s%s", repo+":1.2.0", args, code, w, out, stderr)
			}
		}
	}

	out, stderr, code := fluxctl(t, admin, "release", "-s", svc, "--update-all-images", "--dry-run")
	if code != 0 || !strings.Contains(out, "Container app: "+repo+":1.0.0 -> 1.1.0") ||
		!strings.Contains(out, "Signature: profile ci: verified by keyless "+issuer+" "+release) ||
		!strings.Contains(out, "skipped newer images that do not pass signature verification: "+repo+":1.2.0 (failed: profile ci: failed (wrong-identity): a signature by subject \""+stranger+"\"") {
		t.Fatalf("--update-all-images --dry-run: exit %d, want 1.1.0 verified by the workflow and 1.2.0 skipped for its identity\n%s%s", code, out, stderr)
	}
	if out, stderr, code := fluxctl(t, deployer, "release", "-s", svc, "--update-all-images", "-y"); code != 0 {
		t.Fatalf("release --update-all-images: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{app: {"app=" + repo + ":1.1.0"}})
	if y := gitShowRemote(t, path); !strings.Contains(y, "image: "+repo+":1.1.0") {
		t.Errorf("%s in the remote:\n%s", path, y)
	}
}
