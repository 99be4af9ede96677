package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/cosigntest"
)

// TestVerifyKeysFromASecret: a fluxd whose --verify-config profile names
// its cosign public key by keySecrets, a Secret in the stack's cluster
// (no key file): a release of an unsigned image is refused, one of an
// image signed by that key is released, into git and the cluster.
func TestVerifyKeysFromASecret(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	kc := kubeClient(t)
	const app, dir, secret = "versecret", "verify-secret-e2e", "e2e-cosign-keys"
	repo := stack.Registry + "/" + app
	signer, err := cosigntest.NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0", "1.2.0"} {
		if err := stack.PushImage(ctx, app, tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// 1.1.0 signed; 1.2.0 unsigned.
	d, err := name.NewDigest(repo+"@"+digestOf(t, ctx, app, "1.1.0"), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := signer.Sign(d); err != nil {
		t.Fatal(err)
	}

	cfgDir := t.TempDir()
	pub := filepath.Join(cfgDir, "cosign.pub")
	if err := signer.WritePublicKey(pub); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(pub)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(pub); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secret},
		Data:       map[string][]byte{"cosign.pub": pem, "README": []byte("not a key")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.CoreV1().Secrets("default").Delete(ctx, secret, metav1.DeleteOptions{}) })
	cfg := filepath.Join(cfgDir, "verify.yaml")
	if err := os.WriteFile(cfg, []byte("profiles:\n- name: signed\n  keySecrets: [default/"+secret+"]\nrepositories:\n- match: "+repo+"\n  profile: signed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := dir + "/" + app + ".yaml"
	pushManifest(t, "Add "+app, map[string]string{path: policyDeployment(app, repo+":1.0.0", nil)})
	t.Cleanup(func() { removeManifest(t, path, app) })

	// A Secret that is not there stops fluxd at start, naming it.
	missing := filepath.Join(cfgDir, "missing.yaml")
	if err := os.WriteFile(missing, []byte("profiles:\n- name: signed\n  keySecrets: [default/e2e-no-such-keys]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if bad, err := stack.StartNamedFluxd(startCtx, "fluxd-verify-secret-missing", filepath.Join(binDir, "fluxd"), instance, nil, "--git-path="+dir, "--verify-config="+missing); err == nil {
		_ = bad.Signal(syscall.SIGTERM)
		t.Errorf("fluxd started with a keySecrets Secret that does not exist")
	} else if log, _ := os.ReadFile(stack.Log("fluxd-verify-secret-missing")); !strings.Contains(string(log), `keySecrets default/e2e-no-such-keys: reading the Secret: secrets \"e2e-no-such-keys\" not found`) &&
		!strings.Contains(string(log), `keySecrets default/e2e-no-such-keys: reading the Secret: secrets "e2e-no-such-keys" not found`) {
		t.Errorf("fluxd with a missing keySecrets Secret: %v; its log does not name the Secret:\n%s", err, log)
	}

	f := startFaultFluxd(t, "fluxd-verify-secret", dir, nil, "--verify-config="+cfg)
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	svc := "default:deployment/" + app

	out, stderr, code := fluxctl(t, env, "release", "-s", svc, "-y", "-i", repo+":1.2.0")
	if code == 0 || !strings.Contains(out+stderr, "is unsigned") {
		t.Errorf("release of the unsigned 1.2.0: exit %d, want it refused as unsigned:\n%s%s", code, out, stderr)
	}
	out, stderr, code = fluxctl(t, env, "release", "-s", svc, "-y", "-i", repo+":1.1.0")
	if code != 0 {
		t.Fatalf("release of 1.1.0, signed by the Secret's key: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{app: {"app=" + repo + ":1.1.0"}})
	if y := gitShowRemote(t, path); !strings.Contains(y, "image: "+repo+":1.1.0") {
		t.Errorf("%s in the remote:\n%s", path, y)
	}
}
