package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// digestOf is the manifest digest the stack's registry has for repo:tag
// now, read with a HEAD as any client would.
func digestOf(t *testing.T, ctx context.Context, repo, tag string) string {
	t.Helper()
	ref, err := name.NewTag(stack.Registry+"/"+repo+":"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Head(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatalf("HEAD %s: %v", ref, err)
	}
	return d.Digest.String()
}

// TestPinnedDigestFollowsLatest: an automated service pinned by digest
// (fluxd.io/pin-digest) on the mutable tag latest, and one that Keel's
// force policy with keel.sh/match-tag automates, are released when latest
// is pushed again with new content: the commit in the remote holds
// latest@<the new digest>, the Deployments run it, the history records
// it, and list-images --digests shows it.
func TestPinnedDigestFollowsLatest(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	ctx := testContext(t)
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	viewer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	repo := stack.Registry + "/pinapp"
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	if err := stack.PushImage(ctx, "pinapp", "latest", t0); err != nil {
		t.Fatal(err)
	}
	d1 := digestOf(t, ctx, "pinapp", "latest")
	const pinPath, keelPath = "deploy/pin.yaml", "deploy/keelpin.yaml"
	// Both written on latest with no digest: the automator's first
	// release pins them (and, the shared fluxd's sync being off, creates
	// them in the cluster).
	pushManifest(t, "Add pinned workloads", map[string]string{
		pinPath: policyDeployment("pinapp", repo+":latest",
			map[string]string{"fluxd.io/automated": "true", "fluxd.io/automated-by": instance, "fluxd.io/pin-digest": "true"}),
		// Keel's force with match-tag, as Keel users write it.
		keelPath: policyDeployment("keelpin", repo+":latest", map[string]string{"keel.sh/policy": "force", "keel.sh/match-tag": "true"}),
	})
	t.Cleanup(func() { removeManifest(t, pinPath, "pinapp"); removeManifest(t, keelPath, "keelpin") })
	waitRolledOut(t, kc, map[string][]string{"pinapp": {"app=" + repo + ":latest@" + d1}, "keelpin": {"app=" + repo + ":latest@" + d1}})

	// latest moves: a new image pushed under the same tag, and a notification.
	if err := stack.PushImage(ctx, "pinapp", "latest", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	d2 := digestOf(t, ctx, "pinapp", "latest")
	if d2 == d1 {
		t.Fatalf("the re-push kept the digest %s", d1)
	}
	if out, stderr, code := fluxctl(t, deployer, "notify", repo+":latest"); code != 0 {
		t.Fatalf("notify: exit %d\n%s%s", code, out, stderr)
	}
	want := "app=" + repo + ":latest@" + d2
	waitRolledOut(t, kc, map[string][]string{"pinapp": {want}, "keelpin": {want}})
	for _, p := range []string{pinPath, keelPath} {
		if y := gitShowRemote(t, p); !strings.Contains(y, "image: "+repo+":latest@"+d2) {
			t.Errorf("%s in the remote after the digest moved:\n%s", p, y)
		}
	}

	// The history row names the change, old digest to new. The job
	// records it when it ends, which may be just after the Deployments
	// report the rollout: wait for it.
	var out string
	if err := poll(ctx, 30*time.Second, func() error {
		o, stderr, code := fluxctl(t, viewer, "history", "default:deployment/pinapp", "-o", "json")
		out = o
		if code != 0 {
			return fmt.Errorf("history: exit %d\n%s%s", code, o, stderr)
		}
		var evs []struct {
			Type    string
			Changes []struct{ From, To string }
		}
		if err := json.Unmarshal([]byte(o), &evs); err != nil {
			return fmt.Errorf("history -o json: %v", err)
		}
		for _, ev := range evs {
			for _, c := range ev.Changes {
				if c.From == repo+":latest@"+d1 && c.To == repo+":latest@"+d2 {
					return nil
				}
			}
		}
		return fmt.Errorf("no history row records latest@%s -> latest@%s", d1, d2)
	}); err != nil {
		t.Errorf("%v:\n%s", err, out)
	}

	// list-images --digests shows the digest latest has, marked running.
	out, stderr, code := fluxctl(t, viewer, "list-images", "pinapp", "--digests")
	if code != 0 || !strings.Contains(out, "DIGEST") || !regexpLine(out, `->\s+latest\s.*`+d2) {
		t.Errorf("list-images --digests: exit %d\n%s%s", code, out, stderr)
	}
}

// TestPinnedManualRelease: a release of a tag to a pinned service, not
// automated, writes the tag with its digest; the dry run shows it first.
// (The shared fluxd's sync is off: the release applies it.)
func TestPinnedManualRelease(t *testing.T) {
	f := sharedFluxd(t)
	kc := kubeClient(t)
	ctx := testContext(t)
	deployer := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"], "USER=erin"}
	repo := stack.Registry + "/pinmanual"
	t0 := time.Date(2026, 5, 2, 0, 0, 0, 0, time.UTC)
	for i, tag := range []string{"1.0.0", "1.1.0"} {
		if err := stack.PushImage(ctx, "pinmanual", tag, t0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	d0, d1 := digestOf(t, ctx, "pinmanual", "1.0.0"), digestOf(t, ctx, "pinmanual", "1.1.0")
	const path = "deploy/pinmanual.yaml"
	pushManifest(t, "Add a pinned manual workload", map[string]string{path: policyDeployment("pinmanual", repo+":1.0.0@"+d0,
		map[string]string{"fluxd.io/pin-digest.app": "true"})})
	t.Cleanup(func() { removeManifest(t, path, "pinmanual") })

	target := repo + ":1.1.0@" + d1
	var out, stderr string
	var code int
	if err := poll(ctx, 60*time.Second, func() error {
		out, stderr, code = fluxctl(t, deployer, "release", "-s", "pinmanual", "-i", repo+":1.1.0", "--dry-run")
		if code != 0 || !strings.Contains(out, target) {
			return fmt.Errorf("dry run: exit %d\n%s%s", code, out, stderr)
		}
		return nil
	}); err != nil {
		t.Fatalf("the dry run does not show the digest: %v", err)
	}
	if out, stderr, code = fluxctl(t, deployer, "release", "-y", "-s", "pinmanual", "-i", repo+":1.1.0"); code != 0 {
		t.Fatalf("release: exit %d\n%s%s", code, out, stderr)
	}
	waitRolledOut(t, kc, map[string][]string{"pinmanual": {"app=" + target}})
	if y := gitShowRemote(t, path); !strings.Contains(y, "image: "+target) {
		t.Errorf("git after the pinned release:\n%s", y)
	}
}

// regexpLine says whether some line of out matches expr.
func regexpLine(out, expr string) bool {
	re := regexp.MustCompile(expr)
	for _, l := range strings.Split(out, "\n") {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}
