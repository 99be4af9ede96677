package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
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
	defer func() { _ = g.Signal(syscall.SIGTERM) }()
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

// A 429 storm from a registry (to fluxd only, with Retry-After): the
// automator reports the service failing and backs off; once the storm
// ends it releases the image pushed meanwhile. No automation is lost.
func TestTooManyRequestsStormLosesNoAutomation(t *testing.T) {
	f := sharedFluxd(t)
	ctx := testContext(t)
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	var storm atomic.Bool
	var refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if storm.Load() && strings.Contains(r.UserAgent(), "fluxd") {
			refused.Add(1)
			w.Header().Set("Retry-After", "1")
			http.Error(w, `{"errors":[{"code":"TOOMANYREQUESTS","message":"toomanyrequests: rate limit exceeded"}]}`, http.StatusTooManyRequests)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	pushTo := func(tag string, day int) {
		img, _ := random.Image(64, 1)
		img, _ = mutate.CreatedAt(img, v1.Time{Time: time.Date(2026, 6, day, 0, 0, 0, 0, time.UTC)})
		ref, _ := name.NewTag(host + "/storm:" + tag)
		if err := remote.Write(ref, img); err != nil {
			t.Fatal(err)
		}
	}
	pushTo("1.0.0", 1)
	storm.Store(true)
	t.Cleanup(func() { removeManifest(t, "deploy/storm.yaml", "storm") })
	pushManifest(t, "Add the storm service", map[string]string{"deploy/storm.yaml": policyDeployment("storm", host+"/storm:1.0.0",
		map[string]string{"fluxd.io/automated": "true", "fluxd.io/automated-by": instance, "fluxd.io/tag-all": "semver:^1"})})
	pushTo("1.1.0", 2)

	// The automator cannot read the registry: it says so, and backs off.
	var out string
	if err := poll(ctx, 60*time.Second, func() error {
		out, _, _ = fluxctl(t, viewer, "list-services", "-o", "json")
		var services []struct {
			ID         string
			Automation *struct {
				State     string
				LastError string `json:"lastError"`
			}
		}
		_ = json.Unmarshal([]byte(out), &services)
		for _, s := range services {
			if s.ID == "default:deployment/storm" && s.Automation != nil && s.Automation.State == "failing" && strings.Contains(strings.ToLower(s.Automation.LastError), "too") {
				return nil
			}
		}
		return fmt.Errorf("storm is not reported failing yet")
	}); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("requests refused during the storm: %d", refused.Load())

	// The storm ends: the release of 1.1.0 follows, with no notification.
	storm.Store(false)
	if err := poll(ctx, 90*time.Second, func() error {
		clone := filepath.Join(t.TempDir(), "c")
		gitCLI(t, "", "clone", "-q", "--depth=1", "-b", stack.GitBranch, stack.GitURL, clone)
		if y := gitCLI(t, clone, "show", "HEAD:deploy/storm.yaml"); !strings.Contains(y, host+"/storm:1.1.0") {
			return fmt.Errorf("not released yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("after the storm: %v\nlist-services: %s", err, out)
	}
	// Its job ends once the Deployment it created has rolled out.
	waitRolledOut(t, kubeClient(t), map[string][]string{"storm": {"app=" + host + "/storm:1.1.0"}})
	if err := poll(ctx, 30*time.Second, func() error {
		out, _, _ := fluxctl(t, viewer, "jobs", "-o", "json")
		var jobs []struct{ State string }
		_ = json.Unmarshal([]byte(out), &jobs)
		for _, j := range jobs {
			if j.State == "running" || j.State == "queued" {
				return fmt.Errorf("a job is still %s", j.State)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
