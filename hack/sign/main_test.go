package main

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/verify"
	"github.com/fluxd/fluxd/verify/cosign"
)

const (
	github   = "https://token.actions.githubusercontent.com"
	workflow = "https://github.com/org/app/.github/workflows/release.yml@refs/heads/main"
)

// pushImage pushes a random image to a registry of its own and returns
// it by tag, as the demo's images are named (127.0.0.1:PORT/app:TAG).
func pushImage(t *testing.T, tag string) (string, name.Repository) {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo, err := name.NewRepository(strings.TrimPrefix(srv.URL, "http://")+"/helloworld", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(repo.Tag(tag), img); err != nil {
		t.Fatal(err)
	}
	return repo.Tag(tag).String(), repo
}

// check verifies image under the profile a config (written beside its
// files, as a person on the demo writes .stack/verify.yaml) names,
// loaded as fluxd loads --verify-config.
func check(t *testing.T, dir, config, image string) verify.Result {
	t.Helper()
	path := filepath.Join(dir, "verify.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := verify.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p := &l.Profiles[0]
	ref, err := name.ParseReference(image, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cosign.New(cosign.Config{}).Verify(context.Background(), ref.Context().Name(), desc.Digest.String(), p, l.Keys[p.Name])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", res)
	return res
}

// A CA made by 'sign ca', reloaded by a second 'sign ca' and by 'sign
// keyless', signs as the identity given, verifiably by fluxd's verifier
// against the trusted root the first run wrote; another identity is
// refused.
func TestKeylessWithSavedCA(t *testing.T) {
	image, _ := pushImage(t, "1.1.0")
	dir := t.TempDir()
	caDir := filepath.Join(dir, "ca")
	if err := run([]string{"ca", caDir}); err != nil {
		t.Fatal(err)
	}
	root, err := os.ReadFile(filepath.Join(caDir, "trusted_root.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"ca", caDir}); err != nil {
		t.Fatal(err)
	}
	again, err := os.ReadFile(filepath.Join(caDir, "trusted_root.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(root) {
		t.Fatalf("a second 'sign ca' changed the trusted root: the CA was not reused")
	}

	profile := func(subject string) string {
		return "profiles:\n- name: ci\n  keyless:\n  - issuer: " + github + "\n    subject: " + subject + "\n  trustedRoot: ca/trusted_root.json\n"
	}
	if res := check(t, dir, profile(workflow), image); res.Outcome != verify.Unsigned {
		t.Fatalf("before signing: %s, want unsigned", res)
	}
	if err := run([]string{"keyless", "--ca", caDir, "--issuer", github, "--subject", workflow, image}); err != nil {
		t.Fatal(err)
	}
	res := check(t, dir, profile(workflow), image)
	if res.Outcome != verify.Verified || !strings.Contains(res.Signer, workflow) {
		t.Fatalf("signed keyless as %s: %s, want verified by that identity", workflow, res)
	}
	if res := check(t, dir, profile("https://github.com/org/app/.github/workflows/other.yml@refs/heads/main"), image); res.Outcome != verify.Failed || res.Reason != verify.WrongIdentity {
		t.Fatalf("another subject required: %s, want failed (wrong-identity)", res)
	}

	// A CA made afresh elsewhere is not trusted by the first's root.
	if err := run([]string{"ca", filepath.Join(dir, "other")}); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"keyless", "--ca", filepath.Join(dir, "other"), "--issuer", github, "--subject", workflow, image}); err != nil {
		t.Fatal(err)
	}
	if res := check(t, dir, profile(workflow), image); res.Outcome != verify.Failed {
		t.Fatalf("signed by another test CA: %s, want failed", res)
	}
}

// 'sign attest' pushes an attestation that fluxd's verifier accepts with
// the key: a profile requiring an SPDX SBOM fails before and verifies
// after.
func TestAttest(t *testing.T) {
	t.Setenv("COSIGN_PASSWORD", "demo-password")
	image, _ := pushImage(t, "1.1.0")
	dir := t.TempDir()
	prefix := filepath.Join(dir, "cosign")
	if err := run([]string{"generate-key-pair", "--output-key-prefix", prefix}); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"sign", "--key", prefix + ".key", image}); err != nil {
		t.Fatal(err)
	}
	config := "profiles:\n- name: sbom\n  keys: [cosign.pub]\n  attestations: [https://spdx.dev/Document]\n"
	if res := check(t, dir, config, image); res.Outcome != verify.Failed || res.Reason != verify.MissingAttestation {
		t.Fatalf("signed, not attested: %s, want failed (missing-attestation)", res)
	}
	sbom := filepath.Join(dir, "sbom.spdx.json")
	if err := os.WriteFile(sbom, []byte(`{"spdxVersion": "SPDX-2.3", "name": "helloworld"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"attest", "--key", prefix + ".key", "--type", "spdxjson", "--predicate", sbom, image}); err != nil {
		t.Fatal(err)
	}
	if res := check(t, dir, config, image); res.Outcome != verify.Verified {
		t.Fatalf("signed and attested: %s, want verified", res)
	}
}

// Bad input is refused with what to do, before anything is pushed.
func TestRefusals(t *testing.T) {
	image, _ := pushImage(t, "1.1.0")
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "sbom.txt")
	if err := os.WriteFile(notJSON, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"keyless", "--ca", filepath.Join(dir, "none"), "--issuer", github, "--subject", workflow, image}, "run 'go run ./hack/sign ca"},
		{[]string{"keyless", "--ca", dir, "--issuer", github, image}, "keyless needs --ca, --issuer, --subject"},
		{[]string{"ca"}, "ca needs one argument"},
		{[]string{"attest", "--key", "k", "--type", "sbom", image}, "neither a URI nor one of cosign's names"},
		{[]string{"attest", "--key", "k", "--type", "spdxjson", "--predicate", notJSON, image}, "is not a JSON object"},
	} {
		err := run(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sign %s: %v, want an error saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if err := run([]string{"ca", filepath.Join(dir, "ca")}); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"keyless", "--ca", filepath.Join(dir, "ca"), "--issuer", "github", "--subject", workflow, image}); err == nil || !strings.Contains(err.Error(), "is not a URL") {
		t.Errorf("an issuer that is not a URL: %v", err)
	}
}
