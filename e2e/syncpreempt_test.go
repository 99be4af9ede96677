package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// preemptManifests are 1,000 ConfigMaps marked with mark, and a
// Deployment running helloworld:image.
func preemptManifests(ns, mark, image string) map[string]string {
	files := map[string]string{ns + "/namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + ns + "\n",
		ns + "/web.yaml": fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: preempt-web\n  namespace: %s\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: preempt-web}\n  template:\n    metadata:\n      labels: {app: preempt-web}\n    spec:\n      containers: [{name: app, image: %s/helloworld:%s}]\n", ns, stack.Registry, image)}
	var b strings.Builder
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%04d\n  namespace: %s\n  annotations: {mark: %q}\ndata: {i: \"%d\"}\n", i, ns, mark, i)
		if i%100 == 99 {
			files[fmt.Sprintf("%s/cms-%d.yaml", ns, i/100)] = b.String()
			b.Reset()
		}
	}
	return files
}

// TestReleaseDuringABigSyncGoesFirst: a release asked for while a sync
// applies 1,000 changed objects (at the default client rate limit, about
// 20 s of applying) does not wait for the sync: the sync stops between
// objects, the release applies, and the sync then finishes from git. What
// is checked is the order the API server recorded (resourceVersions):
// some of the sync's objects were applied after the release's Deployment,
// which cannot happen when the release waits for the whole sync.
func TestReleaseDuringABigSyncGoesFirst(t *testing.T) {
	if stack == nil {
		t.Skip("needs the local stack")
	}
	const ns = "preempt"
	pushManifest(t, "Add 1,000 ConfigMaps and a Deployment", preemptManifests(ns, "0", "1.0.0"))
	f := startFaultFluxd(t, "fluxd-preempt", ns, nil, "--sync-interval=1h", "--git-poll-interval=1h", "--sync-inventory=default/fluxd-preempt", "--sync-timeout=10m")
	c := fluxdv1.NewFluxServiceClient(dial(t, f.Addr))
	ctx := withToken(context.Background(), f.Tokens["deployer"])
	if _, err := c.Sync(ctx, &fluxdv1.SyncRequest{}); err != nil {
		t.Fatal(err)
	}
	kc := kubeClient(t)

	pushManifest(t, "Mark every ConfigMap", preemptManifests(ns, "1", "1.0.0"))
	syncDone := make(chan error, 1)
	go func() {
		_, err := c.Sync(ctx, &fluxdv1.SyncRequest{})
		syncDone <- err
	}()
	// The sync is under way once some objects carry the new mark.
	marked := func() (n int, rv string) {
		list, err := kc.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cm := range list.Items {
			if cm.Annotations["mark"] == "1" {
				n++
			}
		}
		return n, list.ResourceVersion
	}
	var t0 string
	if err := poll(context.Background(), 2*time.Minute, func() error {
		n, rv := marked()
		if n < 20 {
			return fmt.Errorf("%d ConfigMaps marked", n)
		}
		t0 = rv
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Watch the Deployment from here, to learn when the release applied it.
	w, err := kc.AppsV1().Deployments(ns).Watch(context.Background(), metav1.ListOptions{ResourceVersion: t0, FieldSelector: fields.OneTermEqualSelector("metadata.name", "preempt-web").String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	rel, err := c.Release(ctx, &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE,
		Spec: &fluxdv1.ReleaseSpec{Services: []string{ns + ":deployment/preempt-web"}, Image: stack.Registry + "/helloworld:1.1.0", User: "erin"}})
	if err != nil {
		t.Fatal(err)
	}
	var releasedRV int64
	timeout := time.After(3 * time.Minute)
	for releasedRV == 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch of preempt-web ended")
			}
			if d, ok := ev.Object.(*appsv1.Deployment); ok && strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":1.1.0") {
				releasedRV, _ = strconv.ParseInt(d.ResourceVersion, 10, 64)
			}
		case <-timeout:
			t.Fatalf("the release (job %s) never applied helloworld:1.1.0", rel.GetJobId())
		}
	}
	if err := <-syncDone; err != nil {
		t.Fatal(err)
	}
	list, err := kc.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start, _ := strconv.ParseInt(t0, 10, 64)
	before, after := 0, 0
	for _, cm := range list.Items {
		if !strings.HasPrefix(cm.Name, "cm-") {
			continue // kube-root-ca.crt
		}
		if cm.Annotations["mark"] != "1" {
			t.Errorf("%s still has mark %q after the sync", cm.Name, cm.Annotations["mark"])
		}
		rv, _ := strconv.ParseInt(cm.ResourceVersion, 10, 64)
		switch {
		case rv > releasedRV:
			after++
		case rv > start:
			before++
		}
	}
	t.Logf("from the release's request to its apply the sync applied %d objects; it applied %d after the release", before, after)
	if after == 0 {
		t.Errorf("the release applied after the whole sync (%d objects applied while it waited, none after): it was not let through between objects", before)
	}
	d, err := kc.AppsV1().Deployments(ns).Get(context.Background(), "preempt-web", metav1.GetOptions{})
	if err != nil || !strings.HasSuffix(d.Spec.Template.Spec.Containers[0].Image, ":1.1.0") {
		t.Errorf("preempt-web after the sync: %v %v; want the release's 1.1.0 kept", err, d.Spec.Template.Spec.Containers)
	}

	// fluxctl sync follows a long sync (1,000 changed objects take at
	// least 18 s at the default rate limit) and says it is still syncing;
	// --no-wait starts one and returns at once.
	env := []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"]}
	pushManifest(t, "Mark every ConfigMap again", preemptManifests(ns, "2", "1.1.0"))
	out, stderr, code := fluxctl(t, env, "sync")
	if code != 0 || !strings.Contains(out, "1000 configured") || !strings.Contains(stderr, "still syncing (") {
		t.Errorf("fluxctl sync: exit %d, want the sync's report and progress on stderr:\n%s%s", code, out, stderr)
	}
	pushManifest(t, "Mark every ConfigMap once more", preemptManifests(ns, "3", "1.1.0"))
	out, stderr, code = fluxctl(t, env, "sync", "--no-wait")
	if code != 0 || !strings.Contains(out, "Sync started") {
		t.Fatalf("fluxctl sync --no-wait: exit %d\n%s%s", code, out, stderr)
	}
	if err := poll(context.Background(), 3*time.Minute, func() error {
		cm, err := kc.CoreV1().ConfigMaps(ns).Get(context.Background(), "cm-0999", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Annotations["mark"] != "3" {
			return fmt.Errorf("cm-0999 has mark %q", cm.Annotations["mark"])
		}
		return nil
	}); err != nil {
		t.Errorf("the sync fluxctl sync --no-wait started never applied git: %v", err)
	}
}
