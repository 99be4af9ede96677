package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/cosigntest"
)

// TestReleaseRequiresAttestation: a fluxd whose profile for one
// repository requires a cosign key's signature and an SPDX SBOM
// attestation. 2.0.0 is signed but not attested: its release is refused,
// and the dry run says missing-attestation for the SPDX predicate type.
// Once the attestation is pushed (as cosign attest --key --type spdxjson
// pushes it, to the .att tag), the same release is made: 2.0.0 in the
// remote and in the cluster.
func TestReleaseRequiresAttestation(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	kc := kubeClient(t)
	const app, dir = "attapp", "attest-e2e"
	repo := stack.Registry + "/" + app
	ci, err := cosigntest.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	digests := map[string]name.Digest{}
	for i, tag := range []string{"1.0.0", "2.0.0"} {
		if err := stack.PushImage(ctx, app, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		d, err := name.NewDigest(repo+"@"+digestOf(t, ctx, app, tag), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := ci.Sign(d); err != nil {
			t.Fatal(err)
		}
		digests[tag] = d
	}
	if err := ci.Attest(digests["1.0.0"], cosigntest.SPDX, map[string]any{"spdxVersion": "SPDX-2.3", "name": app + ":1.0.0"}); err != nil {
		t.Fatal(err)
	}

	cfgDir := t.TempDir()
	if err := ci.WritePublicKey(filepath.Join(cfgDir, "cosign.pub")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(cfgDir, "verify.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n- name: sbom\n  keys: [cosign.pub]\n  attestations: ["+cosigntest.SPDX+"]\nrepositories:\n- match: "+repo+"\n  profile: sbom\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := dir + "/" + app + ".yaml"
	pushManifest(t, "Add "+app, map[string]string{path: policyDeployment(app, repo+":1.0.0", map[string]string{"fluxd.io/tag-all": "semver:*"})})
	t.Cleanup(func() { removeManifest(t, path, app) })
	f := startFaultFluxd(t, "fluxd-attest", dir, nil, "--verify-config="+cfg)
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	svc := "default:deployment/" + app
	release := []string{"release", "-s", svc, "-i", repo + ":2.0.0"}

	// Signed, not attested: the dry run and the release say why.
	out, stderr, code := fluxctl(t, deployer, append(release, "--dry-run")...)
	for _, w := range []string{"does not pass signature verification", "failed (missing-attestation)", "no attestation of predicate type " + cosigntest.SPDX + " for " + digests["2.0.0"].DigestStr()} {
		if code == 0 || !strings.Contains(out+stderr, w) {
			t.Errorf("dry run of an unattested image: exit %d, want it refused saying %q:\n%s%s", code, w, out, stderr)
		}
	}
	t.Logf("dry run before the attestation (exit %d):\n%s%s", code, out, stderr)
	out, stderr, code = fluxctl(t, deployer, append(release, "-y", "--force")...)
	if code == 0 || !strings.Contains(out+stderr, "missing-attestation") {
		t.Errorf("release of an unattested image with --force: exit %d, want it refused for missing-attestation:\n%s%s", code, out, stderr)
	}
	if y := gitShowRemote(t, path); !strings.Contains(y, "image: "+repo+":1.0.0") {
		t.Fatalf("a refused release changed the remote:\n%s", y)
	}

	// Attested: the same release is made.
	if err := ci.Attest(digests["2.0.0"], cosigntest.SPDX, map[string]any{"spdxVersion": "SPDX-2.3", "name": app + ":2.0.0"}); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = fluxctl(t, deployer, append(release, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "Signature: profile sbom: verified by key "+ci.ID()) || !strings.Contains(out, "attestations "+cosigntest.SPDX+" by key "+ci.ID()) {
		t.Fatalf("dry run of the attested image: exit %d, want it verified with its attestation:\n%s%s", code, out, stderr)
	}
	t.Logf("dry run after the attestation:\n%s", out)
	if out, stderr, code := fluxctl(t, deployer, append(release, "-y")...); code != 0 {
		t.Fatalf("release of the attested image: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{app: {"app=" + repo + ":2.0.0"}})
	if y := gitShowRemote(t, path); !strings.Contains(y, "image: "+repo+":2.0.0") {
		t.Errorf("%s in the remote:\n%s", path, y)
	}
}

// TestReleaseRefusesTagMovedToUnsignedDigest: 2.0.0 is signed, and a plan
// shows it verified; then 2.0.0 is pushed again with other content,
// unsigned. The next plan reads the tag's new digest and refuses it as
// unsigned, naming that digest, not the old one's signature; the
// Deployment keeps 1.0.0.
func TestReleaseRefusesTagMovedToUnsignedDigest(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	kc := kubeClient(t)
	const app, dir = "movapp", "moved-e2e"
	repo := stack.Registry + "/" + app
	ci, err := cosigntest.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 8, 2, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "2.0.0"} {
		if err := stack.PushImage(ctx, app, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
		d, err := name.NewDigest(repo+"@"+digestOf(t, ctx, app, tag), name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := ci.Sign(d); err != nil {
			t.Fatal(err)
		}
	}
	signed := digestOf(t, ctx, app, "2.0.0")

	cfgDir := t.TempDir()
	if err := ci.WritePublicKey(filepath.Join(cfgDir, "cosign.pub")); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(cfgDir, "verify.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n- name: signed\n  keys: [cosign.pub]\nrepositories:\n- match: "+repo+"\n  profile: signed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := dir + "/" + app + ".yaml"
	pushManifest(t, "Add "+app, map[string]string{path: policyDeployment(app, repo+":1.0.0", map[string]string{"fluxd.io/tag-all": "semver:*"})})
	t.Cleanup(func() { removeManifest(t, path, app) })
	f := startFaultFluxd(t, "fluxd-moved", dir, nil, "--verify-config="+cfg)
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	svc := "default:deployment/" + app
	release := []string{"release", "-s", svc, "-i", repo + ":2.0.0"}

	out, stderr, code := fluxctl(t, deployer, append(release, "--dry-run")...)
	if code != 0 || !strings.Contains(out, "Signature: profile signed: verified by key "+ci.ID()) || !strings.Contains(out, signed) {
		t.Fatalf("dry run of the signed 2.0.0: exit %d, want it verified at %s:\n%s%s", code, signed, out, stderr)
	}

	// The tag moves to an unsigned image.
	if err := stack.PushImage(ctx, app, "2.0.0", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	moved := digestOf(t, ctx, app, "2.0.0")
	if moved == signed {
		t.Fatal("pushing 2.0.0 again did not move the tag")
	}
	for _, args := range [][]string{append(release, "--dry-run"), append(release, "-y", "--force")} {
		out, stderr, code := fluxctl(t, deployer, args...)
		t.Logf("%v after the tag moved (exit %d):\n%s%s", args[len(args)-1], code, out, stderr)
		for _, w := range []string{"does not pass signature verification", "is unsigned", "no cosign signature for " + moved} {
			if code == 0 || !strings.Contains(out+stderr, w) {
				t.Errorf("%v after the tag moved: exit %d, want it refused saying %q:\n%s%s", args[len(args)-1], code, w, out, stderr)
			}
		}
	}
	if y := gitShowRemote(t, path); !strings.Contains(y, "image: "+repo+":1.0.0") {
		t.Errorf("a refused release changed the remote:\n%s", y)
	}
	// Nothing was applied: the Deployment, if the sync applied it yet,
	// does not run the moved 2.0.0.
	if d, err := kc.AppsV1().Deployments("default").Get(ctx, app, metav1.GetOptions{}); err == nil {
		for _, c := range d.Spec.Template.Spec.Containers {
			if strings.HasSuffix(c.Image, ":2.0.0") {
				t.Errorf("the Deployment runs %s after a refused release", c.Image)
			}
		}
	} else if !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}
