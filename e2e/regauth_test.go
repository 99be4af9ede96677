package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// regauthManifest is the service of the registry-credentials tests: one
// Deployment in its own namespace whose image is in the registry that
// requires authentication, with no imagePullSecrets.
func regauthManifest(image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: regauth
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: regauth
spec:
  replicas: 1
  selector:
    matchLabels: {app: regauth}
  template:
    metadata:
      labels: {app: regauth}
    spec:
      containers:
        - name: app
          image: %s
`, image)
}

// TestRegistryCredentialsForAnAuthenticatingRegistry runs fluxds against
// a distribution registry that requires basic authentication, with
// credentials that no workload references: named with --registry-secret
// (a dockerconfigjson Secret), or in a --registry-credentials file. Each
// lists the service's images; a wrong password gives an error naming the
// registry and the credentials' source, and never the password.
func TestRegistryCredentialsForAnAuthenticatingRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	kc := kubeClient(t)
	var raw [12]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	user, password := "fluxd-puller", "pw-"+hex.EncodeToString(raw[:])
	wrong := "wrong-" + hex.EncodeToString(raw[:6])
	host, err := stack.StartAuthRegistry(ctx, user, password)
	if err != nil {
		t.Fatal(err)
	}

	// One at a time: the distribution registry fails parallel pushes of
	// images that share a blob now and then.
	for i, tag := range []string{"1.0.0", "1.1.0"} {
		img, err := random.Image(256, 1)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.CreatedAt(img, v1.Time{Time: time.Date(2026, 5, 1+i, 0, 0, 0, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
		ref, err := name.NewTag(host+"/regauth/app:"+tag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuth(&authn.Basic{Username: user, Password: password})); err != nil {
			t.Fatalf("pushing %s: %v", ref, err)
		}
	}
	// Without credentials the registry refuses even the tag list.
	repo, err := name.NewRepository(host+"/regauth/app", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.List(repo, remote.WithContext(ctx)); err == nil {
		t.Fatal("the registry listed tags without credentials")
	}

	image := host + "/regauth/app:1.0.0"
	m := regauthManifest(image)
	pushManifest(t, "Add the regauth service", map[string]string{"regauth/app.yaml": m})
	kubectlApply(t, m)
	t.Cleanup(func() {
		_ = kc.CoreV1().Namespaces().Delete(context.Background(), "regauth", metav1.DeleteOptions{})
	})

	// Secrets in the service's namespace that no workload references.
	dockerConfig := func(pw string) []byte {
		return []byte(`{"auths":{"` + host + `":{"username":"` + user + `","password":"` + pw + `"}}}`)
	}
	for secret, pw := range map[string]string{"registry-cred": password, "wrong-cred": wrong} {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: "regauth"},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(pw)},
		}
		if _, err := kc.CoreV1().Secrets("regauth").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	credFile := func(pw string) string {
		f := filepath.Join(t.TempDir(), "registries.yaml")
		if err := os.WriteFile(f, []byte("registries:\n  \""+host+"\":\n    username: "+user+"\n    password: "+pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	goodFile, wrongFile := credFile(password), credFile(wrong)

	const svc = "regauth:deployment/app"
	// listImages starts a fluxd of its own on regauth/ with flag and
	// returns what 'fluxctl list-images' prints once check passes (or
	// fails the test after 30 s).
	listImages := func(t *testing.T, fluxdName, flag string, check func(out string) bool) string {
		t.Helper()
		f := startFaultFluxd(t, fluxdName, "regauth", nil, flag)
		env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
		var out string
		if err := poll(ctx, 30*time.Second, func() error {
			stdout, stderr, _ := fluxctl(t, env, "list-images", svc)
			out = stdout + stderr
			if !check(out) {
				return fmt.Errorf("not yet")
			}
			return nil
		}); err != nil {
			t.Fatalf("fluxd %s: list-images %s:\n%s\n(log: %s)", flag, svc, out, stack.Log(fluxdName))
		}
		for _, secret := range []string{password, wrong} {
			if strings.Contains(out, secret) {
				t.Errorf("a password appears in the output:\n%s", out)
			}
		}
		return out
	}
	listed := func(out string) bool {
		return hasLine(out, "*  1.1.0", "2026-05-02") && hasLine(out, "-> 1.0.0", "2026-05-01")
	}
	refused := func(source string) func(string) bool {
		return func(out string) bool {
			return strings.Contains(out, "the registry "+host+" refused the credentials from "+source)
		}
	}

	t.Run("registry-secret", func(t *testing.T) {
		listImages(t, "fluxd-regauth-secret", "--registry-secret=regauth/registry-cred", listed)
	})
	t.Run("registry-credentials", func(t *testing.T) {
		listImages(t, "fluxd-regauth-file", "--registry-credentials="+goodFile, listed)
	})
	t.Run("wrong password in registry-secret", func(t *testing.T) {
		out := listImages(t, "fluxd-regauth-wrong-secret", "--registry-secret=regauth/wrong-cred", refused("--registry-secret regauth/wrong-cred"))
		t.Logf("list-images with a wrong password:\n%s", out)
	})
	t.Run("wrong password in registry-credentials", func(t *testing.T) {
		listImages(t, "fluxd-regauth-wrong-file", "--registry-credentials="+wrongFile, refused("--registry-credentials "+wrongFile))
	})
}
