package e2e

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A private registry (basic auth) whose credentials fluxd has only
// through the workload's imagePullSecrets.
func TestListImagesWithImagePullSecret(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	ctx := context.Background()

	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "puller" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="private"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for i, tag := range []string{"1.0", "1.1"} {
		img, _ := random.Image(64, 1)
		img, _ = mutate.CreatedAt(img, v1.Time{Time: time.Date(2026, 3, 1+i, 0, 0, 0, 0, time.UTC)})
		ref, _ := name.NewTag(host + "/private:" + tag)
		if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "puller", Password: "s3cret"})); err != nil {
			t.Fatal(err)
		}
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "private-pull", Namespace: "default"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + host + `":{"username":"puller","password":"s3cret"}}}`)},
	}
	if _, err := kc.CoreV1().Secrets("default").Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createDeployment(t, kc, "private", corev1.PodSpec{
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "private-pull"}},
		Containers:       []corev1.Container{{Name: "app", Image: host + "/private:1.0"}},
	})
	t.Cleanup(func() {
		_ = kc.CoreV1().Secrets("default").Delete(context.Background(), "private-pull", metav1.DeleteOptions{})
	})

	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	var out string
	err := poll(ctx, 30*time.Second, func() error {
		var code int
		out, _, code = fluxctl(t, viewer, "list-images", "default:deployment/private")
		if code != 0 || !hasLine(out, "*  1.1", "2026-03-02") || !hasLine(out, "-> 1.0", "2026-03-01") {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list-images through the pull secret:\n%s", out)
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("the password appears in the output")
	}

	// A workload with no pull secret of its own: a fluxd told to use the
	// Secret for every workload (--registry-secret) reads the registry.
	createDeployment(t, kc, "private-bare", corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: host + "/private:1.0"}}})
	g, err := stack.StartNamedFluxd(ctx, "fluxd-regsecret", filepath.Join(binDir, "fluxd"), instance, nil, "--registry-secret=default/private-pull")
	if err != nil {
		t.Fatalf("%v (log: %s)", err, stack.Log("fluxd-regsecret"))
	}
	defer func() { _ = syscall.Kill(g.PID, syscall.SIGTERM) }()
	env := []string{"FLUX_URL=" + g.Addr, "FLUX_TOKEN=" + g.Tokens["viewer"]}
	err = poll(ctx, 30*time.Second, func() error {
		var code int
		out, _, code = fluxctl(t, env, "list-images", "default:deployment/private-bare")
		if code != 0 || !hasLine(out, "*  1.1", "2026-03-02") {
			return io.ErrUnexpectedEOF
		}
		return nil
	})
	if err != nil {
		t.Fatalf("list-images through --registry-secret:\n%s", out)
	}
}

// A registry's push notification (the distribution registry's format)
// reaches fluxd's webhook and refreshes the repository.
func TestWebhookNotification(t *testing.T) {
	sharedFluxd(t)
	body := `{"events":[{"action":"push","target":{"repository":"redis","tag":"7.2.0"},"request":{"host":"` + stack.Registry + `"}}]}`
	post := func(url string) (*http.Response, string) {
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	if resp, _ := post("http://" + webhookAddr + "/v1/notify"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the secret: %s", resp.Status)
	}
	resp, out := post("http://" + webhookAddr + "/v1/notify?token=" + webhookSecret)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(out, `"repository":"`+stack.Registry+`/redis"`) || !strings.Contains(out, `"source":"distribution"`) {
		t.Errorf("with the secret: %s\n%s", resp.Status, out)
	}
}
