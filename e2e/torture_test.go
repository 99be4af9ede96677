package e2e

// The torture suite (issue 26): a seeded, randomized run of what users,
// people with git, the registry, operators and the network do to two
// fluxd replicas on PostgreSQL with leader election, a real registry and
// a smart-HTTP git remote; then, once everything has settled, the checks
// of internal/torture judge from outside what git, the history database
// and the cluster hold. See docs/torture.md.
//
// It runs only when asked: make torture SEED=… STEPS=… (FLUXD_TORTURE_SEED,
// FLUXD_TORTURE_STEPS; FLUXD_TORTURE_ENFORCE lists the checks whose
// violations fail the test, the others are reported).

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/fluxd/fluxd/history"
	historystore "github.com/fluxd/fluxd/history/store"
	"github.com/fluxd/fluxd/internal/githttp"
	"github.com/fluxd/fluxd/internal/localstack"
	"github.com/fluxd/fluxd/internal/pgserver"
	"github.com/fluxd/fluxd/internal/testcerts"
	"github.com/fluxd/fluxd/internal/tlsfiles"
	"github.com/fluxd/fluxd/internal/torture"
	"github.com/fluxd/fluxd/release"
)

// tortureServices are the run's workloads: tt-d shares tt-a's repository,
// so that one image release moves two services; tt-e is a Flux v2
// ImagePolicy whose markers set the image of the Deployment tt-e and a
// ConfigMap's tag (tortureFluxV2); tt-f is a Flux v2 HelmRelease with
// its image in its values (tortureHelmRelease), with no Helm controller;
// tt-g is a Deployment a kustomization builds, released through its
// images: entry (tortureKustomize); tt-h is an ImagePolicy whose marker
// is in a kustomize base that an overlay builds from (tortureBase: it
// moves the Deployments tt-h and tt-h-o); tt-i is an ImagePolicy whose
// marker is in a kind: List's item (tortureList).
var tortureServices = []torture.Service{
	{Name: "tt-a", Repo: "torture-a"},
	{Name: "tt-b", Repo: "torture-b"},
	{Name: "tt-c", Repo: "torture-c"},
	{Name: "tt-d", Repo: "torture-a"},
	{Name: "tt-e", Repo: "torture-e", Format: torture.ImagePolicy},
	{Name: "tt-f", Repo: "torture-f", Format: torture.HelmRelease},
	{Name: "tt-g", Repo: "torture-g", Format: torture.Kustomize},
	{Name: "tt-h", Repo: "torture-h", Format: torture.ImagePolicyBase},
	{Name: "tt-i", Repo: "torture-i", Format: torture.ImagePolicyList},
}

// The overlay's name suffix in tortureBase.
const tortureOverlaySuffix = "-o"

const (
	tortureDir    = "torture"
	tortureLease  = "fluxd-torture"
	tortureSettle = 5 * time.Minute
)

func tortureManifest(s torture.Service, image string, automated bool) string {
	auto := ""
	if automated {
		auto = fmt.Sprintf("    fluxd.io/automated: \"true\"\n    fluxd.io/automated-by: %q\n    fluxd.io/tag-all: \"semver:^1\"\n", instance)
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
  annotations:
    torture.fluxd.io/owner: team-%[1]s
%[3]sspec:
  replicas: 1
  minReadySeconds: 2
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: app
          image: %[2]s
`, s.Name, image, auto)
}

// tortureFluxV2 is an ImagePolicy service's files, as a repository
// written for Flux v2 holds them: name.yaml, a Deployment whose image is
// marked whole and a ConfigMap whose tag is marked :tag (the sync applies
// them); name-automation.yaml, its ImageRepository, ImagePolicy (semver,
// every 1.x release) and an ImageUpdateAutomation covering the run's
// directory (fluxd reads them from git; the cluster serves no Flux v2
// CRDs, so the sync skips them).
func tortureFluxV2(s torture.Service, repo string) (workload, automation string) {
	image, tag := repo+":"+torture.InitialTag, torture.InitialTag
	workload = fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
  annotations:
    torture.fluxd.io/owner: team-%[1]s
spec:
  replicas: 1
  minReadySeconds: 2
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: app
          image: %[2]s # {"$imagepolicy": "%[4]s:%[1]s"}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: %[1]s-config
  namespace: default
data:
  TAG: "%[3]s"   # {"$imagepolicy": "%[4]s:%[1]s:tag"}
  OTHER: "%[3]s" # not a marker: left alone
`, s.Name, image, tag, torture.PolicyNamespace)
	automation = fmt.Sprintf(`apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageRepository
metadata:
  name: %[1]s
  namespace: %[3]s
spec:
  image: %[2]s
  interval: 1m
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: %[1]s
  namespace: %[3]s
  annotations:
    torture.fluxd.io/owner: team-%[1]s
spec:
  imageRepositoryRef:
    name: %[1]s
  policy:
    semver:
      range: ">=1.0.0 <2.0.0"
---
apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageUpdateAutomation
metadata:
  name: torture
  namespace: %[3]s
spec:
  interval: 30m
  sourceRef:
    kind: GitRepository
    name: torture
  git:
    commit:
      author:
        email: fluxcdbot@torture.invalid
        name: fluxcdbot
  update:
    path: ./%[4]s
    strategy: Setters
`, s.Name, repo, torture.PolicyNamespace, tortureDir)
	return workload, automation
}

// tortureMarked is the Deployment of an ImagePolicy's service, its image
// marked whole.
func tortureMarked(s torture.Service, repo string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: default
  annotations:
    torture.fluxd.io/owner: team-%[1]s
spec:
  replicas: 1
  minReadySeconds: 2
  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
        - name: app
          image: %[2]s:%[3]s # {"$imagepolicy": "%[4]s:%[1]s"}
`, s.Name, repo, torture.InitialTag, torture.PolicyNamespace)
}

// torturePolicy is an ImagePolicy service's ImageRepository and
// ImagePolicy (semver, every 1.x release), without an automation: tt-e's
// ImageUpdateAutomation covers the run's directory.
func torturePolicy(s torture.Service, repo string) string {
	return fmt.Sprintf(`apiVersion: image.toolkit.fluxcd.io/v1beta2
kind: ImageRepository
metadata:
  name: %[1]s
  namespace: %[3]s
spec:
  image: %[2]s
---
apiVersion: image.toolkit.fluxcd.io/v1
kind: ImagePolicy
metadata:
  name: %[1]s
  namespace: %[3]s
  annotations:
    torture.fluxd.io/owner: team-%[1]s
spec:
  imageRepositoryRef:
    name: %[1]s
  policy:
    semver:
      range: ">=1.0.0 <2.0.0"
`, s.Name, repo, torture.PolicyNamespace)
}

// tortureKustomize is a kustomize service's files (under name/): its
// Deployment, automated (semver:^1) by fluxd's annotations and naming its
// repository without a tag, and the kustomization whose images: entry
// sets the tag; cluster is the Deployment the build makes.
func tortureKustomize(s torture.Service, repo string, automated bool) (files map[string]string, cluster string) {
	d := tortureManifest(s, repo, automated)
	return map[string]string{
		s.Name + "/deployment.yaml": d,
		s.Name + "/kustomization.yaml": fmt.Sprintf(`resources:
  - deployment.yaml
images:
  - name: %s
    newTag: "%s" # a release edits this value
`, repo, torture.InitialTag),
	}, strings.Replace(d, "image: "+repo+"\n", "image: "+repo+":"+torture.InitialTag+"\n", 1)
}

// tortureBase is the files of an ImagePolicy's service whose marker sets
// the image of a Deployment in a kustomize base (name/base/), which the
// base builds as it is and an overlay (name/overlay/) builds with a name
// suffix; cluster is the two Deployments the builds make.
func tortureBase(s torture.Service, repo string) (files map[string]string, cluster string) {
	d := tortureMarked(s, repo)
	return map[string]string{
		s.Name + "/base/deployment.yaml":       d,
		s.Name + "/base/kustomization.yaml":    "resources:\n  - deployment.yaml\n",
		s.Name + "/overlay/kustomization.yaml": "nameSuffix: " + tortureOverlaySuffix + "\nresources:\n  - ../base\n",
		s.Name + "-automation.yaml":            torturePolicy(s, repo),
	}, d + "---\n" + strings.Replace(d, "  name: "+s.Name+"\n", "  name: "+s.Name+tortureOverlaySuffix+"\n", 1)
}

// tortureList is the files of an ImagePolicy's service whose marker sets
// the image of a Deployment that is the item of a kind: List; cluster is
// that Deployment.
func tortureList(s torture.Service, repo string) (files map[string]string, cluster string) {
	d := tortureMarked(s, repo)
	item := strings.ReplaceAll(strings.TrimRight(d, "\n"), "\n", "\n    ")
	return map[string]string{
		s.Name + ".yaml":            "apiVersion: v1\nkind: List\nitems:\n  - " + item + "\n",
		s.Name + "-automation.yaml": torturePolicy(s, repo),
	}, d
}

// tortureHelmRelease is a HelmRelease service's file: its image in
// values as image: {repository, tag}, automated (semver:^1) by fluxd's
// annotations. The CRD is served (minimal, as in TestHelmReleases), but
// no Helm controller runs: fluxd applies it and ends each of its
// releases "applied, not rolled out" after --rollout-timeout.
func tortureHelmRelease(s torture.Service, repo string) string {
	return fmt.Sprintf(`apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: %[1]s
  namespace: default
  annotations:
    torture.fluxd.io/owner: team-%[1]s
    fluxd.io/automated: "true"
    fluxd.io/automated-by: %[4]q
    fluxd.io/tag-all: "semver:^1"
spec:
  interval: 5m
  chart:
    spec: {chart: app, sourceRef: {kind: HelmRepository, name: charts}}
  values:
    # the app's image, set by fluxd
    image:
      repository: %[2]s
      tag: "%[3]s" # a release edits this value only
    replicaCount: 1
`, s.Name, repo, torture.InitialTag, instance)
}

// tortureRef is how fluxctl names the service called name.
func tortureRef(name string) string {
	if s := svcByName(name); s.Format != torture.Plain && s.Format != torture.Kustomize {
		return s.ID()
	}
	return name
}

// TestTorture is the randomized torture run. It skips unless
// FLUXD_TORTURE_STEPS is set.
func TestTorture(t *testing.T) {
	steps, _ := strconv.Atoi(os.Getenv("FLUXD_TORTURE_STEPS"))
	if steps <= 0 {
		t.Skip("the torture suite runs when asked: make torture SEED=… STEPS=… (FLUXD_TORTURE_STEPS)")
	}
	seed := time.Now().UnixNano() % 1_000_000_000
	if s := os.Getenv("FLUXD_TORTURE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("FLUXD_TORTURE_SEED=%q: %v", s, err)
		}
	}
	enforce := torture.AllChecks
	if e, ok := os.LookupEnv("FLUXD_TORTURE_ENFORCE"); ok {
		enforce = e
	}
	ops := torture.Generate(seed, steps, tortureServices)
	fmt.Fprintf(os.Stderr, "torture: seed %d, %d steps, checks enforced %q (replay: make torture SEED=%d STEPS=%d)\n", seed, steps, enforce, seed, steps)
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	r := newTortureRun(t, seed)
	// The log is printed under -v, and always when the run fails.
	defer func() {
		t.Logf("torture: seed %d, %d steps; replay: make torture SEED=%d STEPS=%d\noperation log:\n%s", seed, steps, seed, steps, r.log.String())
		t.Logf("replica logs: %s, %s", stack.Log("fluxd-torture-a"), stack.Log("fluxd-torture-b"))
	}()
	for _, op := range ops {
		r.do(op)
		time.Sleep(op.Pause)
	}
	r.logf("-- %d steps done; settling (at most %v)", steps, tortureSettle)
	obs := r.settle()
	r.modelAgrees(obs)
	vs := torture.Check(obs)
	enforced, reported := torture.Enforced(vs, enforce)
	stats := fmt.Sprintf("%d commits (%d by people; fluxd's moving each format: %s), %d jobs, %d history rows, %d violations (%d enforced)",
		len(obs.Order), len(obs.PersonCommits), formatCommits(obs), len(obs.Jobs), len(obs.Events), len(vs), len(enforced))
	for _, j := range obs.Jobs {
		r.logf("   job %s by %s: %s at %q, commit %.12s, plan %s%s", j.ID, j.User, j.State, j.Stage, j.Commit, strings.Join(j.Services(), ","), errNote(j.Error))
	}
	r.logf("-- %s", stats)
	fmt.Fprintf(os.Stderr, "torture: seed %d steps %d: %s\n", seed, steps, stats)
	summary := map[string]int{}
	for _, v := range vs {
		summary[v.Check]++
	}
	fmt.Fprintf(os.Stderr, "torture: seed %d steps %d: violations by check %v (enforced %q)\n", seed, steps, summary, enforce)
	for _, v := range reported {
		t.Logf("torture: not enforced here (FLUXD_TORTURE_ENFORCE=%q): %s", enforce, v)
	}
	for _, v := range enforced {
		t.Errorf("torture: %s", v)
	}
}

// modelAgrees fails the run unless fluxd reads each service of another
// format (an ImagePolicy's marked fields) as the checkers' model does at
// the settled head: containers named alike, with the same images. A model
// that read no field would make (a) and (b) pass on anything.
func (r *tortureRun) modelAgrees(obs *torture.Observation) {
	head := obs.Commits[obs.Head]
	err := poll(context.Background(), 30*time.Second, func() error {
		out, err := r.fluxctl("leader", "torture-model", "list-services", "-o", "json")
		if err != nil {
			return err
		}
		var svcs []struct {
			ID         string `json:"id"`
			Containers []struct {
				Name, Image, Goal string
			} `json:"containers"`
			Warnings []string `json:"warnings"`
		}
		if err := json.Unmarshal([]byte(out), &svcs); err != nil {
			return fmt.Errorf("list-services -o json: %w", err)
		}
		for _, s := range tortureServices {
			if s.Format == torture.Plain {
				continue
			}
			want := head.Workloads[s.ID()].Images
			if len(want) == 0 {
				return fmt.Errorf("the model reads no field of %s at the head %.12s", s.ID(), obs.Head)
			}
			got := map[string]string{}
			for _, sv := range svcs {
				if sv.ID != s.ID() {
					continue
				}
				for _, c := range sv.Containers {
					got[c.Name] = c.Image
					if c.Goal != "" {
						got[c.Name] = c.Goal
					}
				}
				if len(sv.Warnings) > 0 {
					r.logf("   fluxd warns on %s: %s", s.ID(), strings.Join(sv.Warnings, "; "))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("fluxd reads %s as %v; the checkers' model as %v", s.ID(), got, want)
			}
		}
		return nil
	})
	if err != nil {
		r.t.Errorf("torture: the model does not read the run's services as fluxd does, so its checks would judge the wrong thing: %v", err)
	}
}

func errNote(e string) string {
	if e == "" {
		return ""
	}
	if l, _, _ := strings.Cut(e, "\n"); len(l) > 300 {
		e = l[:300] + "…"
	} else {
		e = l
	}
	return "; error: " + e
}

// formatCommits is torture.FormatCommits, each format of the run in
// the order of its first service: what (a) and (b) judged of each, and
// what (g) fails when it is 0.
func formatCommits(obs *torture.Observation) string {
	n := torture.FormatCommits(obs)
	var s []string
	for _, f := range torture.Formats(tortureServices) {
		s = append(s, fmt.Sprintf("%s %d", f.Name(), n[f]))
	}
	return strings.Join(s, ", ")
}

// tortureReplica is one of the two fluxd replicas.
type tortureReplica struct {
	name string
	f    *localstack.Fluxd
	hook string // webhook address
}

type tortureRun struct {
	t      *testing.T
	kc     *kubernetes.Clientset
	dyn    dynamic.Interface
	remote *githttp.Remote
	tmp    string // the run's temporary directory
	bare   string // the run's git repository
	dbURL  string
	dbPass string

	replicas   [2]*tortureReplica
	startArgs  func(hook string) []string
	tokens     map[string]string
	tokensFile string
	caFile     string
	hc         *http.Client

	mu      sync.Mutex
	log     strings.Builder
	jobs    []string // job IDs the run started, oldest first
	persons []string // commits people pushed

	commits map[string]*torture.Commit // read so far, by hash (observe)
}

func (r *tortureRun) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.log, "%s ", time.Now().UTC().Format("15:04:05.000"))
	fmt.Fprintf(&r.log, format, args...)
	r.log.WriteByte('\n')
}

func newTortureRun(t *testing.T, seed int64) *tortureRun {
	ctx := testContext(t)
	r := &tortureRun{t: t, kc: kubeClient(t), commits: map[string]*torture.Commit{}}
	// The registry: every repository at 1.0.0.
	t0 := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	repos := map[string]bool{}
	for _, s := range tortureServices {
		if !repos[s.Repo] {
			repos[s.Repo] = true
			if err := stack.PushImage(ctx, s.Repo, torture.InitialTag, t0); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A git repository of the run's own, served over smart HTTP to fluxd;
	// people push to it directly with the git CLI.
	dir := t.TempDir()
	r.bare = filepath.Join(dir, "git", "torture.git")
	r.tmp = dir
	seedDir := filepath.Join(dir, "seed")
	gitCLI(t, "", "init", "-q", "--bare", "-b", "main", r.bare)
	gitCLI(t, r.bare, "config", "http.receivepack", "true")
	gitCLI(t, "", "init", "-q", "-b", "main", seedDir)
	gitCLI(t, seedDir, "remote", "add", "origin", r.bare)
	if err := os.MkdirAll(filepath.Join(seedDir, tortureDir), 0o755); err != nil {
		t.Fatal(err)
	}
	var all []string
	for i, s := range tortureServices {
		repo := stack.Registry + "/" + s.Repo
		files := map[string]string{}
		switch s.Format {
		case torture.ImagePolicy:
			w, a := tortureFluxV2(s, repo)
			files[s.Name+".yaml"], files[s.Name+"-automation.yaml"] = w, a
			all = append(all, w)
		case torture.Kustomize:
			fs, c := tortureKustomize(s, repo, true)
			files = fs
			all = append(all, c)
		case torture.ImagePolicyBase:
			fs, c := tortureBase(s, repo)
			files = fs
			all = append(all, c)
		case torture.ImagePolicyList:
			fs, c := tortureList(s, repo)
			files = fs
			all = append(all, c)
		case torture.HelmRelease:
			m := tortureHelmRelease(s, repo)
			files[s.Name+".yaml"] = m
			all = append(all, m)
		default:
			m := tortureManifest(s, repo+":"+torture.InitialTag, i%2 == 0)
			files[s.Name+".yaml"] = m
			all = append(all, m)
		}
		for name, content := range files {
			path := filepath.Join(seedDir, tortureDir, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	gitCLI(t, seedDir, "add", ".")
	gitCLI(t, seedDir, "-c", "user.name=torture-seed", "-c", "user.email=seed@torture.invalid", "commit", "-q", "-m", "The torture run's services")
	gitCLI(t, seedDir, "push", "-q", "origin", "main")
	r.dyn = dynamicClient(t)
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	_, err := r.dyn.Resource(crd).Get(ctx, "helmreleases.helm.toolkit.fluxcd.io", metav1.GetOptions{})
	hadCRDs := err == nil
	installHelmCRDs(t, r.dyn)
	kubectlApply(t, strings.Join(all, "---\n"))
	t.Cleanup(func() {
		for _, s := range tortureServices {
			_ = r.kc.AppsV1().Deployments("default").Delete(context.Background(), s.Name, metav1.DeleteOptions{})
			switch s.Format {
			case torture.ImagePolicyBase:
				_ = r.kc.AppsV1().Deployments("default").Delete(context.Background(), s.Name+tortureOverlaySuffix, metav1.DeleteOptions{})
			case torture.ImagePolicy:
				_ = r.kc.CoreV1().ConfigMaps("default").Delete(context.Background(), s.Name+"-config", metav1.DeleteOptions{})
			case torture.HelmRelease:
				_ = r.dyn.Resource(hrV2).Namespace("default").Delete(context.Background(), s.Name, metav1.DeleteOptions{})
			}
		}
		if !hadCRDs {
			for _, name := range []string{"helmreleases.helm.toolkit.fluxcd.io", "helmreleases.helm.fluxcd.io"} {
				_ = r.dyn.Resource(crd).Delete(context.Background(), name, metav1.DeleteOptions{})
			}
		}
		_ = r.kc.CoordinationV1().Leases("default").Delete(context.Background(), tortureLease, metav1.DeleteOptions{})
	})
	r.remote = githttp.Serve(t, filepath.Dir(r.bare), githttp.Options{})

	// PostgreSQL, shared by the replicas, and replica TLS.
	url, srv := pgserver.Database(t)
	localstack.NoteSecret("the PostgreSQL password", srv.Password)
	r.dbURL, r.dbPass = url, srv.PasswordFile()
	pki := t.TempDir()
	replicaCA := testcerts.NewCA(t, "replica-ca")
	replicaCA.WriteFiles(t, filepath.Join(pki, "replica-ca.crt"), "")
	replicaCA.WriteLeaf(t, pki, testcerts.Leaf{Name: "replica", DNSNames: []string{"fluxd-replica"}})
	r.caFile = filepath.Join(pki, "replica-ca.crt")
	pool, err := tlsfiles.Pool(r.caFile)
	if err != nil {
		t.Fatal(err)
	}
	r.hc = &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	secretFile := filepath.Join(t.TempDir(), "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(webhookSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	r.startArgs = func(hook string) []string {
		return []string{
			"--tls-cert-file=" + filepath.Join(pki, "replica.crt"), "--tls-key-file=" + filepath.Join(pki, "replica.key"), "--replica-ca-file=" + r.caFile,
			"--git-url=" + r.remote.RepoURL(r.bare), "--git-branch=main", "--git-path=" + tortureDir, "--git-timeout=5s", "--git-poll-interval=2s",
			"--leader-elect", "--leader-elect-lease-name=" + tortureLease,
			"--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=500ms",
			"--history-db=" + r.dbURL, "--history-db-password-file=" + r.dbPass,
			"--automation-short-wait=3s", "--automation-long-wait=10s", "--automation-max-backoff=30s",
			"--rollout-timeout=60s", "--sync-interval=15s", "--shutdown-grace=5s",
			"--webhook-listen=" + hook, "--webhook-secret-file=" + secretFile,
		}
	}
	for i := range r.replicas {
		r.start(i)
	}
	r.logf("-- seed %d: services %v, registry %s, git %s", seed, tortureServices, stack.Registry, r.remote.RepoURL(r.bare))
	return r
}

// start starts replica i (again, on its state directory).
func (r *tortureRun) start(i int) {
	name := "fluxd-torture-" + string(rune('a'+i))
	hook, err := localstack.FreeAddr()
	if err != nil {
		r.t.Fatal(err)
	}
	args := r.startArgs(hook)
	if r.tokens != nil {
		args = append(args, "--tokens-file="+r.tokensFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := stack.StartNamedFluxd(ctx, name, filepath.Join(binDir, "fluxd"), instance, r.tokens, args...)
	if err != nil {
		r.t.Fatalf("starting %s: %v (log: %s)", name, err, stack.Log(name))
	}
	if r.tokens == nil {
		r.tokens, r.tokensFile = f.Tokens, f.TokensFile
	}
	pid := f.PID
	r.t.Cleanup(func() { _ = f.Signal(syscall.SIGKILL) })
	r.replicas[i] = &tortureReplica{name: name, f: f, hook: hook}
	r.logf("   started %s pid %d at %s", name, pid, f.Addr)
}

// leader returns the index of the replica holding the lease, or -1.
func (r *tortureRun) leader() int {
	l, err := r.kc.CoordinationV1().Leases("default").Get(context.Background(), tortureLease, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return -1
	}
	for i, rep := range r.replicas {
		if strings.HasPrefix(*l.Spec.HolderIdentity, rep.f.Addr+"#") {
			return i
		}
	}
	return -1
}

// pick resolves "leader" or "follower" to a replica index.
func (r *tortureRun) pick(role string) int {
	l := r.leader()
	if l < 0 {
		l = 0
	}
	if role == "follower" {
		return 1 - l
	}
	return l
}

func (r *tortureRun) fluxctl(role, user string, args ...string) (string, error) {
	for try := 0; ; try++ {
		before := r.leader()
		rep := r.replicas[r.pick(role)]
		env := []string{"FLUX_URL=https://" + rep.f.Addr, "FLUX_CA_FILE=" + r.caFile, "FLUX_TOKEN=" + r.tokens["deployer"], "FLUX_TIMEOUT=20s", "USER=" + user,
			// fluxctl names its user from git's config before $USER: none here.
			"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1"}
		out, stderr, code := fluxctl(r.t, env, args...)
		if code == 0 {
			return out, nil
		}
		err := fmt.Errorf("fluxctl %s via %s: exit %d: %s", strings.Join(args, " "), rep.name, code, firstLines(out+stderr, 3))
		// A follower refuses what it cannot forward while the lease is
		// between holders (a leader just killed). As fluxd's message
		// advises and a person would, ask again once the lease has moved,
		// so that a run's operations are not lost to that gap (check g
		// judges that every format drew a commit). If the dying leader
		// had queued the call before it fell, the retry is a second
		// release of the same image, judged by the checks like any other
		// release.
		if try == 0 && strings.Contains(out+stderr, "the leader cannot be reached") {
			for i := 0; i < 40 && r.leader() == before; i++ {
				time.Sleep(250 * time.Millisecond)
			}
			r.logf("      -> %v; asked again (leader %d, was %d)", err, r.leader(), before)
			continue
		}
		return out, err
	}
}

func firstLines(s string, n int) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	if len(ls) > n {
		ls = ls[:n]
	}
	return strings.Join(ls, " | ")
}

func svcByName(name string) torture.Service {
	for _, s := range tortureServices {
		if s.Name == name {
			return s
		}
	}
	return torture.Service{}
}

// do carries out one operation and logs what happened.
func (r *tortureRun) do(op torture.Op) {
	r.logf("%s", op)
	note := func(err error) {
		if err != nil {
			r.logf("      -> %v", err)
		}
	}
	ctx := testContext(r.t)
	img := func(repo, tag string) string { return stack.Registry + "/" + repo + ":" + tag }
	user := fmt.Sprintf("torture-%d", op.Step)
	ref := tortureRef(op.Service)
	switch op.Kind {
	case torture.Release:
		note(r.release(op.Replica, user, ref, img(op.Repo, op.Tag)))
	case torture.RaceHotfix:
		hot := img(op.Repo, op.HotfixTag())
		fn := func() {
			err := r.person(op.Step, "race hotfix of "+op.Service, r.personFiles(op), func(file, y string) string {
				if file == r.lockFile(op) {
					y = torture.SetLocked(y, true)
				}
				return r.hotfix(op, file, y, hot)
			})
			r.logf("      (interposed before fluxd's push) a person pushed %s and a lock of %s: %v", hot, op.Service, err)
		}
		// Armed once the job is queued, so that it meets the release's
		// push rather than a policy command's.
		// A target of its own, so that the release has something to push
		// (the drawn tag may be what the service runs already).
		target := fmt.Sprintf("%s-race.%d", op.Tag, op.Step)
		err := stack.PushImage(ctx, op.Repo, target, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(op.Step)*time.Minute))
		if err == nil {
			err = r.release(op.Replica, user, ref, img(op.Repo, target))
		}
		note(err)
		if err == nil {
			r.remote.Interpose.Store(&fn)
		}
	case torture.Cancel:
		r.mu.Lock()
		var id string
		if n := len(r.jobs); n > op.Back {
			id = r.jobs[n-1-op.Back]
		}
		r.mu.Unlock()
		if id == "" {
			r.logf("      -> no job to cancel")
			return
		}
		out, err := r.fluxctl(op.Replica, user, "cancel", id)
		r.logf("      -> cancel %s: %s", id, firstLines(out, 1))
		note(err)
	case torture.PushTag:
		note(stack.PushImage(ctx, op.Repo, op.Tag, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(op.Step)*time.Minute)))
	case torture.Notify:
		body := `{"events":[{"action":"push","target":{"repository":"` + op.Repo + `","tag":"` + op.Tag + `"},"request":{"host":"` + stack.Registry + `"}}]}`
		rep := r.replicas[r.pick(op.Replica)]
		resp, err := r.hc.Post("https://"+rep.hook+"/v1/notify?token="+webhookSecret, "application/json", strings.NewReader(body))
		if err == nil {
			resp.Body.Close()
			r.logf("      -> webhook to %s: %s", rep.name, resp.Status)
		}
		note(err)
	case torture.LockCLI:
		_, err := r.fluxctl(op.Replica, user, "lock", ref, "-m", "torture step "+strconv.Itoa(op.Step))
		note(err)
	case torture.UnlockCLI:
		_, err := r.fluxctl(op.Replica, user, "unlock", ref)
		note(err)
	case torture.Automate:
		_, err := r.fluxctl(op.Replica, user, "automate", ref)
		note(err)
	case torture.Deautomate:
		_, err := r.fluxctl(op.Replica, user, "deautomate", ref)
		note(err)
	case torture.LockGit:
		lock := r.lockFile(op)
		note(r.person(op.Step, "Lock "+op.Service+" by hand", []string{lock}, func(_, y string) string { return torture.SetLocked(y, true) }))
	case torture.UnlockGit:
		// Wherever a lock of the service is.
		note(r.person(op.Step, "Unlock "+op.Service+" by hand", r.personFiles(op), func(_, y string) string { return torture.SetLocked(y, false) }))
	case torture.Hotfix:
		hot := img(op.Repo, op.Tag)
		note(r.person(op.Step, "Hotfix "+op.Service+" to "+op.Tag, []string{hotfixFile(op.Service)}, func(file, y string) string { return r.hotfix(op, file, y, hot) }))
	case torture.Term:
		note(r.stop(op.Replica, syscall.SIGTERM))
	case torture.Kill:
		note(r.stop(op.Replica, syscall.SIGKILL))
	case torture.Takeover:
		note(r.takeover(ctx, op, user, ref, img(op.Repo, op.Tag)))
	case torture.Stall:
		r.remote.Stalled.Store(true)
		time.AfterFunc(op.For, func() { r.remote.Stalled.Store(false) })
	case torture.Refuse:
		r.remote.Refuse.Store(true)
	case torture.LoseReply:
		r.remote.LoseReply.Store(true)
	}
}

// stop stops the replica of role with sig, waits until it has exited and
// starts it again on its state.
func (r *tortureRun) stop(role string, sig syscall.Signal) error {
	i := r.pick(role)
	rep := r.replicas[i]
	was := r.leader()
	_ = rep.f.Signal(sig)
	err := poll(context.Background(), 40*time.Second, func() error {
		if !rep.f.Exited() {
			return fmt.Errorf("%s (pid %d) still runs %v after %v", rep.name, rep.f.PID, 40*time.Second, sig)
		}
		return nil
	})
	r.logf("      -> %v to %s (leader was %d)", sig, rep.name, was)
	r.start(i)
	return err
}

// takeover pushes image (a version of its own), releases it, waits until
// the job runs (op.Phase PhaseRunning) or applies its pushed commit
// (PhaseApplied), op.For longer, and SIGKILLs the leader: the other
// replica takes the job over.
func (r *tortureRun) takeover(ctx context.Context, op torture.Op, user, ref, image string) error {
	if err := stack.PushImage(ctx, op.Repo, op.Tag, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(op.Step)*time.Minute)); err != nil {
		return err
	}
	id, err := r.releaseJob(op.Replica, user, ref, image)
	if err != nil || id == "" {
		return err
	}
	// Queued behind a HelmRelease's job, it may wait out that job's
	// rollout timeout (60 s) and its take-over.
	var state, stage string
	err = poll(ctx, 150*time.Second, func() error {
		out, err := r.fluxctl("leader", user, "job", id, "-o", "json")
		if err != nil {
			return err
		}
		var j struct{ State, Stage string }
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			return fmt.Errorf("job -o json: %w", err)
		}
		state, stage = j.State, j.Stage
		switch {
		case state == "queued":
			return fmt.Errorf("job %s is still queued", id)
		case state == "running" && op.Phase == torture.PhaseApplied && stage != release.StageApplying && stage != release.StageRollingOut:
			return fmt.Errorf("job %s is at %q, not applying yet", id, stage)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if state != "running" {
		r.logf("      -> job %s ended %s (%q) before the leader could be killed", id, state, stage)
		return nil
	}
	time.Sleep(op.For)
	r.logf("      -> job %s running at %q; killing the leader %v later", id, stage, op.For)
	if r.leader() < 0 {
		r.logf("      -> no leader to kill")
		return nil
	}
	return r.stop("leader", syscall.SIGKILL)
}

// workloadFile is the file of the Deployment of the service called name:
// where its annotations (fluxd's, a person's lock) and its marker are.
func workloadFile(name string) string {
	switch svcByName(name).Format {
	case torture.Kustomize:
		return name + "/deployment.yaml"
	case torture.ImagePolicyBase:
		return name + "/base/deployment.yaml"
	}
	return name + ".yaml"
}

// hotfixFile is where a person sets the service's image: its Deployment's
// file, or its kustomization's images: entry.
func hotfixFile(name string) string {
	if svcByName(name).Format == torture.Kustomize {
		return name + "/kustomization.yaml"
	}
	return workloadFile(name)
}

// personFiles are the files in which a person edits the service of op:
// its Deployment's, its kustomization, and an ImagePolicy's own.
func (r *tortureRun) personFiles(op torture.Op) []string {
	s := svcByName(op.Service)
	switch {
	case s.Format.Policy():
		return []string{workloadFile(op.Service), op.Service + "-automation.yaml"}
	case s.Format == torture.Kustomize:
		return []string{workloadFile(op.Service), hotfixFile(op.Service)}
	}
	return []string{workloadFile(op.Service)}
}

// lockFile is where a person's lock of the service of op goes: on the
// ImagePolicy, or on the Deployment its marker sets (op.Target).
func (r *tortureRun) lockFile(op torture.Op) string {
	if svcByName(op.Service).Format.Policy() && op.Target == torture.TargetPolicy {
		return op.Service + "-automation.yaml"
	}
	return workloadFile(op.Service)
}

// hotfix sets the image in the service's file as a person does: the image
// line, every marked value with its marker kept, a HelmRelease's values'
// tag or a kustomization's newTag.
func (r *tortureRun) hotfix(op torture.Op, file, y, image string) string {
	if file != hotfixFile(op.Service) {
		return y
	}
	switch svcByName(op.Service).Format {
	case torture.ImagePolicy, torture.ImagePolicyBase, torture.ImagePolicyList:
		return torture.SetMarked(y, image)
	case torture.Kustomize:
		return torture.SetNewTag(y, image[strings.LastIndex(image, ":")+1:])
	case torture.HelmRelease:
		return torture.SetHelmTag(y, image[strings.LastIndex(image, ":")+1:])
	}
	return torture.SetImage(y, image)
}

// release starts a release and remembers its job.
func (r *tortureRun) release(role, user, svc, image string) error {
	_, err := r.releaseJob(role, user, svc, image)
	return err
}

// releaseJob is release, and returns the job's ID ("" when fluxd started
// none).
func (r *tortureRun) releaseJob(role, user, svc, image string) (string, error) {
	out, err := r.fluxctl(role, user, "release", "-y", "--no-wait", "-s", svc, "-i", image)
	if err != nil {
		return "", err
	}
	if _, rest, ok := strings.Cut(out, "Job "); ok {
		id := strings.Fields(rest)[0]
		r.mu.Lock()
		r.jobs = append(r.jobs, id)
		r.mu.Unlock()
		r.logf("      -> job %s", id)
		return id, nil
	}
	ls := strings.Split(strings.TrimSpace(out), "\n")
	r.logf("      -> %s", ls[len(ls)-1])
	return "", nil
}

// person edits files (in the run's directory) as a person does: fetch,
// edit, commit with the git CLI, push straight to the repository (not
// through the remote fluxd uses); a push refused because fluxd pushed
// first is tried again from the new head.
func (r *tortureRun) person(step int, msg string, files []string, edit func(file, y string) string) error {
	who := fmt.Sprintf("person-%d", step)
	// A clone of the person's own: an interposed push runs beside the
	// run's next operations.
	work, err := os.MkdirTemp(r.tmp, who+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if _, err := gitRun("", "clone", "-q", "-b", "main", r.bare, work); err != nil {
		return err
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		if _, err := gitRun(work, "fetch", "-q", "origin"); err != nil {
			return err
		}
		if _, err := gitRun(work, "reset", "-q", "--hard", "origin/main"); err != nil {
			return err
		}
		changed := false
		for _, f := range files {
			path := filepath.Join(work, tortureDir, f)
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			y := edit(f, string(b))
			if y == string(b) {
				continue
			}
			changed = true
			if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
				return err
			}
		}
		if !changed {
			return errors.New("the edit changes nothing")
		}
		if _, err := gitRun(work, "-c", "user.name="+who, "-c", "user.email="+who+"@torture.invalid", "commit", "-q", "-am", msg); err != nil {
			return err
		}
		if _, last = gitRun(work, "push", "-q", "origin", "HEAD:main"); last == nil {
			head, err := gitRun(work, "rev-parse", "HEAD")
			if err != nil {
				return err
			}
			r.mu.Lock()
			r.persons = append(r.persons, head)
			r.mu.Unlock()
			r.logf("      -> %s pushed %.12s", who, head)
			return nil
		}
	}
	return fmt.Errorf("a person's push, five times refused: %w", last)
}

func gitRun(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, firstLines(string(out), 3))
	}
	return strings.TrimSpace(string(out)), nil
}

// settle lifts every fault, waits until no job is live, git's head has
// stayed put for a while and the cluster runs what it says (or until
// tortureSettle has passed), and reads what the checkers judge.
func (r *tortureRun) settle() *torture.Observation {
	r.remote.Reset()
	deadline := time.Now().Add(tortureSettle)
	var obs *torture.Observation
	var lastHead string
	stable := 0
	for {
		var err error
		obs, err = r.observe()
		if err != nil {
			r.t.Fatalf("reading the run's outcome: %v", err)
		}
		live := 0
		for _, j := range obs.Jobs {
			if j.State == "queued" || j.State == "running" {
				live++
			}
		}
		inSync := len(torture.CheckOutcomes(&torture.Observation{Head: obs.Head, Commits: obs.Commits, Cluster: obs.Cluster})) == 0
		if obs.Head == lastHead && live == 0 && inSync {
			stable++
		} else {
			stable = 0
		}
		lastHead = obs.Head
		if stable >= 3 || time.Now().After(deadline) {
			r.logf("   settled: head %.12s, %d live jobs, cluster in sync %v", obs.Head, live, inSync)
			return obs
		}
		time.Sleep(5 * time.Second)
	}
}

// observe reads git (with the git CLI), the history database and the
// cluster.
func (r *tortureRun) observe() (*torture.Observation, error) {
	o := &torture.Observation{Commits: map[string]*torture.Commit{}, FluxdCommitter: "fluxd"}
	head, err := gitRun(r.bare, "rev-parse", "refs/heads/main")
	if err != nil {
		return nil, err
	}
	o.Head = head
	list, err := gitRun(r.bare, "rev-list", "--topo-order", "--reverse", "--parents", head)
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(list, "\n") {
		f := strings.Fields(l)
		if c, ok := r.commits[f[0]]; ok {
			o.Commits[c.Hash] = c
			o.Order = append(o.Order, c.Hash)
			continue
		}
		c := &torture.Commit{Hash: f[0], Parents: f[1:]}
		meta, err := gitRun(r.bare, "log", "-1", "--format=%cn%x00%B", c.Hash)
		if err != nil {
			return nil, err
		}
		c.Committer, c.Message, _ = strings.Cut(meta, "\x00")
		names, err := gitRun(r.bare, "ls-tree", "-r", "--name-only", c.Hash, "--", tortureDir+"/")
		if err != nil {
			return nil, err
		}
		files := map[string][]byte{}
		for _, n := range strings.Fields(names) {
			b, err := exec.Command("git", "-C", r.bare, "show", c.Hash+":"+n).Output()
			if err != nil {
				return nil, fmt.Errorf("git show %s:%s: %w", c.Hash, n, err)
			}
			files[n] = b
		}
		if c.Workloads, err = torture.ParseWorkloads(files); err != nil {
			return nil, fmt.Errorf("commit %s: %w", c.Hash, err)
		}
		o.Commits[c.Hash] = c
		o.Order = append(o.Order, c.Hash)
		r.commits[c.Hash] = c
	}
	r.mu.Lock()
	o.PersonCommits = append([]string(nil), r.persons...)
	r.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := historystore.Open(ctx, historystore.Config{URL: r.dbURL, PasswordFile: r.dbPass})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	jobs, err := s.Jobs(ctx, instance, 100000)
	if err != nil {
		return nil, err
	}
	for _, hj := range jobs {
		o.Jobs = append(o.Jobs, tortureJob(hj))
	}
	evs, err := s.Events(ctx, instance, history.Query{Limit: 100000})
	if err != nil {
		return nil, err
	}
	for _, ev := range evs {
		te := torture.Event{ID: ev.ID, Type: string(ev.Type), Services: ev.Services, User: ev.User, Commit: ev.Commit, Error: ev.Error, Message: ev.Message}
		for _, c := range ev.Changes {
			te.Changes = append(te.Changes, torture.Update{Service: c.Service, Container: c.Container, From: c.From, To: c.To})
		}
		o.Events = append(o.Events, te)
	}

	o.Cluster = map[string]map[string]string{}
	// No Helm controller runs: fluxd never sees a HelmRelease roll out.
	o.HelmUnreported = true
	for _, svc := range tortureServices {
		if svc.Format == torture.HelmRelease {
			hr, err := r.dyn.Resource(hrV2).Namespace("default").Get(ctx, svc.Name, metav1.GetOptions{})
			if err != nil {
				continue
			}
			repo, _, _ := unstructured.NestedString(hr.Object, "spec", "values", "image", "repository")
			tag, _, _ := unstructured.NestedString(hr.Object, "spec", "values", "image", "tag")
			o.Cluster[svc.ID()] = map[string]string{torture.HelmContainer: repo + ":" + tag}
			continue
		}
	}
	// Every Deployment the head makes: the builds of a base included.
	for id := range o.Commits[o.Head].Workloads {
		name, ok := strings.CutPrefix(id, "default:deployment/")
		if !ok {
			continue
		}
		d, err := r.kc.AppsV1().Deployments("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		imgs := map[string]string{}
		for _, c := range d.Spec.Template.Spec.Containers {
			imgs[c.Name] = c.Image
		}
		o.Cluster[id] = imgs
	}
	o.Formats = map[string]torture.Format{}
	for _, svc := range tortureServices {
		o.Formats[svc.ID()] = svc.Format
	}
	return o, nil
}

// tortureJob is a history job as the checkers see it: its spec's user,
// and its recorded plan's changes.
func tortureJob(hj history.Job) torture.Job {
	j := torture.Job{ID: hj.ID, State: string(hj.State), Stage: hj.Stage, Commit: hj.Commit, Error: hj.Error}
	var spec release.Spec
	if json.Unmarshal(hj.Spec, &spec) == nil {
		j.User, j.Automated = spec.User, spec.Automated
	}
	var plan release.Plan
	if len(hj.Plan) > 0 && json.Unmarshal(hj.Plan, &plan) == nil {
		for _, it := range plan.Items {
			if it.Action != release.Update {
				continue
			}
			for _, u := range it.Updates {
				j.Updates = append(j.Updates, torture.Update{Service: it.Service.String(), Container: u.Container, From: u.Current, To: u.Target})
			}
		}
	}
	return j
}
