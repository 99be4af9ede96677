package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fluxd/fluxd/internal/localstack"
)

// burstPushes is how many tags the burst pushes, one at a time.
const burstPushes = 300

// TestWebhookBurstReleasesTheLastPush points a real distribution
// registry's notifications at a fluxd's webhook listener and pushes 300
// tags (1.0.1 … 1.0.300) of an automated service's repository, one at a
// time. fluxd's automation waits are ten minutes, so only the
// notifications can make it release. The remote branch ends with a
// commit releasing 1.0.300 and the cluster runs it; the release commits
// are few (the notifications coalesce), each releases a newer tag than
// the one before (none lost, none duplicated), and each is one automated
// release in the history. The latency from the last push to the commit
// and to the rollout, and how many notifications the registry sent
// against how many refreshes fluxd did, are logged, never asserted: the
// outer timeouts (3 minutes after the last push) are the only time bound,
// and the bound on the commits (half the pushes) is far from what is seen.
func TestWebhookBurstReleasesTheLastPush(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	kc := kubeClient(t)

	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		t.Fatal(err)
	}
	secret := "burst-" + hex.EncodeToString(raw[:])
	localstack.NoteSecret("the webhook secret of fluxd-burst", secret)
	secretFile := filepath.Join(t.TempDir(), "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hook, err := localstack.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	reg, err := stack.StartDistributionRegistry(ctx, localstack.DistributionOptions{Notify: &localstack.NotifyEndpoint{
		Name: "fluxd", URL: "http://" + hook + "/v1/notify", BearerToken: secret,
		Timeout: 2 * time.Second, Threshold: 5, Backoff: time.Second,
	}})
	if err != nil {
		t.Fatal(err)
	}

	const dir, svc, repo = "webhook-burst", "burstapp", "burst/app"
	img := reg.Addr + "/" + repo + ":"
	ref := func(tag string) name.Tag {
		r, err := name.NewTag(img+tag, name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// One pusher for every push: one transport, one ping.
	pusher, err := remote.NewPusher(remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	push := func(tag string) {
		im, err := random.Image(256, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := pusher.Push(ctx, ref(tag), im); err != nil {
			t.Fatalf("pushing %s: %v", tag, err)
		}
	}
	// 1.0.0 before fluxd starts, so that its first automation pass finds
	// the repository; the registry sends its notifications again until
	// fluxd's listener answers.
	push("1.0.0")

	m := policyDeployment(svc, img+"1.0.0", map[string]string{
		"fluxd.io/automated": "true", "fluxd.io/automated-by": instance, "fluxd.io/tag-all": "semver:^1",
	})
	base := pushManifest(t, "Add the webhook burst service", map[string]string{dir + "/" + svc + ".yaml": m})
	kubectlApply(t, m)
	t.Cleanup(func() {
		_ = kc.AppsV1().Deployments("default").Delete(context.Background(), svc, metav1.DeleteOptions{})
	})
	waitRolledOut(t, kc, map[string][]string{svc: {"app=" + img + "1.0.0"}})

	metrics, _ := localstack.FreeAddr()
	const fluxdName = "fluxd-burst"
	f := startFaultFluxd(t, fluxdName, dir, nil, "--git-poll-interval=10m", "--metrics-listen="+metrics,
		"--webhook-listen="+hook, "--webhook-secret-file="+secretFile)
	env := []string{"FLUX_URL=" + f.Addr, "FLUX_TOKEN=" + f.Tokens["viewer"]}
	fluxdLog := stack.Log(fluxdName)

	// The notifications of 1.0.0 reach fluxd, and the registry's queue
	// drains: pull events among them, which fluxd answered 400 before, and
	// the registry then sent again forever, holding every push behind.
	settled := func() error {
		n, err := notificationCounts(reg.DebugAddr)
		if err != nil {
			return err
		}
		if n.Successes == 0 || n.Pending != 0 {
			return fmt.Errorf("registry notifications: %+v", n)
		}
		if c := countLog(t, fluxdLog, 0); c.refreshes == 0 {
			return fmt.Errorf("fluxd has not refreshed %s yet", repo)
		}
		return nil
	}
	if err := poll(ctx, 60*time.Second, settled); err != nil {
		t.Fatalf("before the burst: %v\nfluxd log: %s\nregistry log: %s", err, fluxdLog, reg.Log)
	}
	before, err := notificationCounts(reg.DebugAddr)
	if err != nil {
		t.Fatal(err)
	}
	logOffset := fileSize(t, fluxdLog)
	regRequestsBefore := metricSum(t, metrics, "fluxd_registry_requests_total")
	if got := commitsSince(t, base, dir); len(got) != 0 {
		t.Fatalf("fluxd committed before the burst: %q", got)
	}

	// A clone to watch the remote with, made before the burst so that a
	// poll is one fetch.
	watch := filepath.Join(t.TempDir(), "watch")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, watch)

	// The burst, one push at a time.
	burstStart := time.Now()
	for i := 1; i <= burstPushes; i++ {
		push(fmt.Sprintf("1.0.%d", i))
	}
	lastPush := time.Now()
	last := img + fmt.Sprintf("1.0.%d", burstPushes)
	t.Logf("pushed %d tags one at a time in %v (%.1f pushes/s)", burstPushes, lastPush.Sub(burstStart).Round(time.Millisecond),
		float64(burstPushes)/lastPush.Sub(burstStart).Seconds())

	// The latency to the commit, as the git CLI sees the remote, and to
	// the rollout, as the API server reports it.
	var toCommit, toRollout time.Duration
	polls := 0
	if err := poll(ctx, 3*time.Minute, func() error {
		polls++
		gitCLI(t, watch, "fetch", "-q", "origin")
		// gitCLI trims the file's last newline.
		if !strings.Contains(gitCLI(t, watch, "show", "origin/"+stack.GitBranch+":"+dir+"/"+svc+".yaml")+"\n", "image: "+last+"\n") {
			return fmt.Errorf("no commit of %s yet", last)
		}
		toCommit = time.Since(lastPush)
		return nil
	}); err != nil {
		t.Fatalf("%v\nfluxd log: %s\nregistry log: %s", err, fluxdLog, reg.Log)
	}
	if err := poll(ctx, 3*time.Minute, func() error {
		d, err := kc.AppsV1().Deployments("default").Get(ctx, svc, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := strings.Join(images(t, kc)[svc], " "); got != "app="+last {
			return fmt.Errorf("%s runs %s", svc, got)
		}
		if err := rolledOut(d); err != nil {
			return err
		}
		toRollout = time.Since(lastPush)
		return nil
	}); err != nil {
		t.Fatalf("the rollout of %s: %v\nfluxd log: %s", last, err, fluxdLog)
	}
	t.Logf("last push → commit of 1.0.%d in the remote: %v (seen at poll %d, every 200 ms plus a git fetch); → rolled out: %v (automation waits are 10m)",
		burstPushes, toCommit.Round(time.Millisecond), polls, toRollout.Round(time.Millisecond))

	// The registry's queue drains; fluxd's last refreshes end.
	if err := poll(ctx, 60*time.Second, func() error {
		n, err := notificationCounts(reg.DebugAddr)
		if err != nil {
			return err
		}
		if n.Pending != 0 {
			return fmt.Errorf("%d notifications pending", n.Pending)
		}
		return nil
	}); err != nil {
		t.Errorf("the registry's notification queue did not drain: %v", err)
	}
	time.Sleep(2 * time.Second)

	// The release commits: few, each a newer tag than the one before,
	// the last 1.0.300, each one automated release in the history.
	clone := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	revs := gitCLI(t, clone, "log", "--reverse", "--format=%H", base+"..HEAD", "--", dir)
	var tags []int
	tagRE := regexp.MustCompile(`image: ` + regexp.QuoteMeta(img) + `1\.0\.(\d+)\n`)
	for _, rev := range strings.Fields(revs) {
		subject := gitCLI(t, clone, "log", "-1", "--format=%s", rev)
		y := gitCLI(t, clone, "show", rev+":"+dir+"/"+svc+".yaml") + "\n"
		mm := tagRE.FindStringSubmatch(y)
		if mm == nil {
			t.Fatalf("commit %s (%q) leaves %s with no image of %s:\n%s", rev, subject, svc, img, y)
		}
		n, _ := strconv.Atoi(mm[1])
		if !strings.HasPrefix(subject, "Release "+img+"1.0."+mm[1]+" ") {
			t.Errorf("commit %s: %q; want a release of %s1.0.%d", rev, subject, img, n)
		}
		if len(tags) > 0 && n <= tags[len(tags)-1] {
			t.Errorf("commit %s releases 1.0.%d after 1.0.%d: a duplicate or a step back", rev, n, tags[len(tags)-1])
		}
		tags = append(tags, n)
	}
	if len(tags) == 0 || tags[len(tags)-1] != burstPushes {
		t.Fatalf("released tags, in commit order: %v; want the last to be %d", tags, burstPushes)
	}
	// "Few": the automator releases whatever is newest each time it is
	// idle, so the count depends on how many release cycles (commit,
	// push, rollout) fit in the burst; here about one per ten pushes. The
	// bound is generous, to catch a fluxd releasing per notification
	// without failing on a slow machine.
	if len(tags) > burstPushes/2 {
		t.Errorf("%d release commits for %d pushes; the notifications did not coalesce", len(tags), burstPushes)
	}
	out, stderr, code := fluxctl(t, env, "history", svc, "-o", "json", "--limit", "1000")
	var events []struct {
		Type    string
		Changes []struct{ To string }
	}
	if code != 0 || json.Unmarshal([]byte(out), &events) != nil {
		t.Fatalf("history: exit %d\n%s%s", code, out, stderr)
	}
	var released []int // oldest first; history lists newest first
	for i := len(events) - 1; i >= 0; i-- {
		switch ev := events[i]; ev.Type {
		case "automated-release":
			for _, ch := range ev.Changes {
				n, err := strconv.Atoi(strings.TrimPrefix(ch.To, img+"1.0."))
				if err != nil {
					t.Errorf("history: an automated release to %q", ch.To)
				}
				released = append(released, n)
			}
		case "failed":
			t.Errorf("history has a failure: %s", out)
		}
	}
	if fmt.Sprint(released) != fmt.Sprint(tags) {
		t.Errorf("history's automated releases: 1.0.%v; the commits': 1.0.%v", released, tags)
	}

	// What it took: the registry's notifications against fluxd's
	// refreshes.
	after, err := notificationCounts(reg.DebugAddr)
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]int{}
	for code, n := range after.Statuses {
		if d := n - before.Statuses[code]; d != 0 {
			statuses[code] = d
		}
	}
	c := countLog(t, fluxdLog, logOffset)
	t.Logf("release commits: %d, releasing 1.0.%v", len(tags), strings.Trim(strings.ReplaceAll(fmt.Sprint(tags), " ", ", 1.0."), "[]"))
	t.Logf("the registry sent %d notifications in the burst (%d events, %d answered 2xx, %d failures, %d errors; statuses %v: 200 answers envelopes without a push, pulls); fluxd accepted %d requests naming %d tagged images (manifest pushes) and %d untagged (blob pushes), and refreshed %s %d times; fluxd's requests to the registry: %.0f",
		after.Successes+after.Failures-before.Successes-before.Failures, after.Events-before.Events,
		after.Successes-before.Successes, after.Failures-before.Failures, after.Errors-before.Errors, statuses,
		c.accepted, c.tagged, c.untagged, repo, c.refreshes, metricSum(t, metrics, "fluxd_registry_requests_total")-regRequestsBefore)
	if c.tagged < burstPushes {
		t.Errorf("fluxd accepted notifications of %d tagged images; want one per manifest push (%d)", c.tagged, burstPushes)
	}
}

// registryNotifications are one endpoint's counters in the distribution
// registry's expvar.
type registryNotifications struct {
	Pending, Events, Successes, Failures, Errors int
	Statuses                                     map[string]int
}

// notificationCounts reads the distribution registry's counters of its
// first notifications endpoint from its debug listener.
func notificationCounts(debugAddr string) (registryNotifications, error) {
	resp, err := http.Get("http://" + debugAddr + "/debug/vars")
	if err != nil {
		return registryNotifications{}, err
	}
	defer resp.Body.Close()
	var vars struct {
		Registry struct {
			Notifications struct {
				Endpoints []struct {
					Metrics registryNotifications
				}
			}
		} `json:"registry"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		return registryNotifications{}, err
	}
	if len(vars.Registry.Notifications.Endpoints) == 0 {
		return registryNotifications{}, fmt.Errorf("the registry's /debug/vars lists no notifications endpoint")
	}
	return vars.Registry.Notifications.Endpoints[0].Metrics, nil
}

// burstLog counts fluxd's log lines about notifications.
type burstLog struct {
	accepted, tagged, untagged, refreshes int
}

// countLog counts, from offset on, fluxd's accepted notifications (and
// the images they name, with a tag or without) and its refreshes.
func countLog(t *testing.T, path string, offset int64) burstLog {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	var c burstLog
	images := regexp.MustCompile(`images="?\[([^\]]*)\]`)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.Contains(l, `msg="webhook accepted"`):
			c.accepted++
			if m := images.FindStringSubmatch(l); m != nil {
				for _, im := range strings.Fields(m[1]) {
					// host:port/repo:tag has two colons, host:port/repo one.
					if strings.Count(im, ":") >= 2 {
						c.tagged++
					} else {
						c.untagged++
					}
				}
			}
		case strings.Contains(l, `msg="image notification: repository refreshed"`):
			c.refreshes++
		}
	}
	return c
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// metricSum adds up every series of a metric on fluxd's endpoint.
func metricSum(t *testing.T, addr, name string) float64 {
	t.Helper()
	var sum float64
	for _, l := range metricLines(t, addr) {
		if rest, ok := strings.CutPrefix(l, name); ok && (strings.HasPrefix(rest, "{") || strings.HasPrefix(rest, " ")) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				sum += v
			}
		}
	}
	return sum
}
