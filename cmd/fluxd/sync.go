package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/fluxd/fluxd/gitrepo/gogit"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/platform/kube/gitguard"
	kubesync "github.com/fluxd/fluxd/platform/kube/sync"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/syncer"
)

// syncFlags are the continuous sync's flags.
type syncFlags struct {
	interval time.Duration
	prune    bool
	pruneNS  bool
	pruneAll bool
	deny     []string
	// allowConversion, allowOwnNS and allowOwnSA lift the guard's
	// default refusals (gitguard.Config).
	allowConversion, allowOwnNS, allowOwnSA bool
	nss                                     []string
	allowDelegation                         []string
	inventory                               string
	timeout                                 time.Duration
}

func (f *syncFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar(&f.interval, "sync-interval", 0, "apply every object under --git-path (every kind) with server-side apply on each new commit and at this interval, correcting drift, e.g. 5m (default: off, fluxd applies only what it releases); fluxd then needs RBAC to apply them")
	fs.BoolVar(&f.prune, "sync-prune", false, "with --sync-interval: delete objects fluxd applied that have left git (never others; an object annotated fluxd.io/prune: disabled is kept)")
	fs.BoolVar(&f.pruneNS, "sync-prune-namespaces", false, "with --sync-prune: also delete Namespaces and CustomResourceDefinitions that left git, and so everything in them (without it, only one annotated fluxd.io/prune: enabled)")
	fs.BoolVar(&f.pruneAll, "sync-prune-all", false, "with --sync-prune: prune even when git holds nothing or more than half of what fluxd created left git at once (held back and reported otherwise, as an empty checkout or a wrong --git-path looks like that)")
	fs.StringSliceVar(&f.deny, "sync-deny-kinds", gitguard.DefaultDenyKinds, "kinds (KIND or KIND.GROUP) git may not apply: whoever can push to git gets what fluxd's RBAC allows, so cluster-wide RBAC, admission webhooks/policies and APIServices are refused by default; --sync-deny-kinds= (empty) allows every kind")
	fs.BoolVar(&f.allowConversion, "sync-allow-conversion-webhooks", false, "let git apply CustomResourceDefinitions whose conversion calls a webhook (refused by default: the API server would send every object of the kind to the Service a commit names)")
	fs.BoolVar(&f.allowOwnNS, "sync-allow-own-namespace", false, "let git apply objects in fluxd's own namespace ($POD_NAMESPACE and its ServiceAccount's), by the sync or a release (refused by default: fluxd's Secrets, RBAC and Deployment live there)")
	fs.BoolVar(&f.allowOwnSA, "sync-allow-own-service-account", false, "let git apply pods (in any workload, by the sync or a release) that run as fluxd's ServiceAccount, and token Secrets for it (refused by default: they would have fluxd's rights)")
	fs.StringSliceVar(&f.nss, "sync-namespaces", nil, "the only namespaces git may apply namespaced objects (and Namespaces) to, by the sync or a release (default: any)")
	fs.StringSliceVar(&f.allowDelegation, "sync-allow-delegation", nil, "kinds ("+strings.Join(gitguard.DelegationKinds, ",")+") git may apply, by the sync or a release, even when what their controller (Flux's, Argo CD's) applies is not pinned to fluxd's limits: a Kustomization without spec.serviceAccountName and spec.targetNamespace, an Application or ApplicationSet without a destination namespace and a project other than default, any AppProject, a HelmRelease without spec.serviceAccountName under --sync-namespaces or a scope, anything with spec.kubeConfig (refused by default: their controllers often run as cluster-admin)")
	fs.StringVar(&f.inventory, "sync-inventory", "", "NAMESPACE/NAME of the ConfigMap where the sync lists what it applied, for --sync-prune (default: $POD_NAMESPACE/fluxd-sync-HASH, HASH derived from --git-url, --git-branch and --git-path, so that two fluxd instances never share one); a sync finding an inventory written for another source prunes nothing")
	fs.DurationVar(&f.timeout, "sync-timeout", 5*time.Minute, "how long one sync may take")
}

// validate checks the sync's flags, so that fluxd refuses them before it
// opens anything (configure) as well as where they are used (newSyncer).
func (f syncFlags) validate() error {
	if err := gitguard.ValidateDelegation(f.allowDelegation); err != nil {
		return err // the guard holds for releases too, with the sync off
	}
	if f.interval == 0 {
		if f.prune {
			return errors.New("--sync-prune needs --sync-interval: fluxd prunes only when it syncs")
		}
		return nil
	}
	var errs []error
	if f.inventory != "" {
		if ns, name, ok := strings.Cut(f.inventory, "/"); !ok || ns == "" || name == "" {
			errs = append(errs, fmt.Errorf("--sync-inventory %q is not NAMESPACE/NAME", f.inventory))
		}
	}
	return errors.Join(append(errs, syncer.Config{Interval: f.interval, Prune: f.prune, Timeout: f.timeout}.Validate())...)
}

// newSyncer builds the sync from its flags, or returns nil when it is off.
// The sync reads git through the release engine (one clone, one fetch for
// both) and is kicked by every fetch that finds a new commit.
func newSyncer(f syncFlags, source string, rc *rest.Config, guard *gitguard.Guard, engine *release.Engine, rec syncer.Recorder, reg prometheus.Registerer, log *slog.Logger) (*syncer.Syncer, error) {
	if err := f.validate(); err != nil || f.interval == 0 {
		return nil, err
	}
	if f.inventory == "" {
		f.inventory = defaultInventory(envOr("POD_NAMESPACE", "default"), source)
	}
	ns, name, _ := strings.Cut(f.inventory, "/")
	cfg := syncer.Config{Interval: f.interval, Prune: f.prune, Timeout: f.timeout}
	kcfg := kubesync.Config{InventoryNamespace: ns, InventoryName: name, Source: source, PruneNamespaces: f.pruneNS, PruneAll: f.pruneAll, Guard: guard}
	applier, err := kubesync.New(rc, kcfg, log)
	if err != nil {
		return nil, err
	}
	s := syncer.New(cfg, engine, applier, rec, log)
	engine.OnRevision(s.Kick)
	registerSyncMetrics(reg, s)
	return s, nil
}

// newGuard is what git may apply, by the sync and by releases, from the
// flags and who fluxd is in the cluster (asked of the API server once, at
// start).
func newGuard(ctx context.Context, f syncFlags, rc *rest.Config, tokens *auth.Store, log *slog.Logger) *gitguard.Guard {
	self, err := gitguard.Discover(ctx, rc, gitguard.PodNamespace())
	if err != nil {
		log.Warn("cannot tell fluxd's ServiceAccount: git's pods that would run as it cannot be refused", "component", "sync", "error", err)
	}
	log.Info("git may not apply objects in fluxd's namespace nor pods running as its ServiceAccount", "component", "sync", "self", self.String(),
		"allow_own_namespace", f.allowOwnNS, "allow_own_service_account", f.allowOwnSA)
	if len(f.allowDelegation) > 0 {
		log.Warn("git may apply objects that make another controller apply things past fluxd's limits", "component", "sync", "sync_allow_delegation", strings.Join(f.allowDelegation, ","))
	}
	scoped := func() bool {
		for _, sc := range tokens.Instances() {
			if sc != nil {
				return true
			}
		}
		return false
	}
	return gitguard.New(gitguard.Config{DenyKinds: f.deny, AllowConversionWebhooks: f.allowConversion, Self: self,
		AllowOwnNamespace: f.allowOwnNS, AllowOwnServiceAccount: f.allowOwnSA, Namespaces: f.nss, AllowDelegation: f.allowDelegation, Scoped: scoped,
		Admin: adminReviews(rc, log)})
}

// adminReviews tells the guard whether a ServiceAccount a Kustomization
// or HelmRelease names may do anything in the cluster, and logs once when
// fluxd may not ask (the guard then takes such ServiceAccounts at their
// word).
func adminReviews(rc *rest.Config, log *slog.Logger) func(namespace, name string) (bool, error) {
	review, err := gitguard.AdminReviews(rc, 5*time.Minute)
	if err != nil {
		log.Warn("cannot tell whether the ServiceAccounts git's Kustomizations and HelmReleases name are admins", "component", "sync", "error", err)
		return nil
	}
	var once sync.Once
	return func(namespace, name string) (bool, error) {
		admin, err := review(namespace, name)
		if err != nil {
			once.Do(func() {
				log.Warn("cannot tell whether the ServiceAccounts git's Kustomizations and HelmReleases name are admins; they are taken at their word", "component", "sync", "error", err)
			})
		}
		return admin, err
	}
}

// syncSource names what the sync applies, credentials left out of the
// URL: the identity its inventory is stamped with.
func syncSource(url, branch string, paths []string) string {
	return fmt.Sprintf("%s branch %s paths %s", gogit.Redact(url), branch, strings.Join(paths, ","))
}

// defaultInventory is the inventory of source in namespace ns: one per
// source, so two fluxd instances never prune by each other's list.
func defaultInventory(ns, source string) string {
	return ns + "/fluxd-sync-" + kubesync.OwnerOf(source)
}

// registerSyncMetrics exports the last sync: when it ended, how long it
// took, whether it failed and how many objects it failed on. A replica
// that has not synced (a follower: only the leader syncs; or the leader
// before its first sync) exports none of them, rather than zeros that
// would read as a sync that did nothing.
func registerSyncMetrics(reg prometheus.Registerer, s *syncer.Syncer) {
	reg.MustRegister(syncCollector{s})
}

var (
	syncLastDesc     = prometheus.NewDesc("fluxd_sync_last_timestamp_seconds", "When the last sync of git to the cluster ended (Unix time); absent on a replica that has not synced (followers).", nil, nil)
	syncDurationDesc = prometheus.NewDesc("fluxd_sync_duration_seconds", "How long the last sync took.", nil, nil)
	syncFailedDesc   = prometheus.NewDesc("fluxd_sync_failed", "1 when the last sync failed, on any object or file.", nil, nil)
	syncObjectsDesc  = prometheus.NewDesc("fluxd_sync_objects", "Objects the last sync applied or found unchanged.", nil, nil)
	syncFailedObjs   = prometheus.NewDesc("fluxd_sync_failed_objects", "Objects the last sync could not apply, and files it could not read.", nil, nil)
	syncRequestsDesc = prometheus.NewDesc("fluxd_sync_kube_requests", "Requests the last sync sent to the Kubernetes API server (a sync that finds nothing changed sends a few, whatever the number of objects).", nil, nil)
)

// syncCollector exports the last sync's report, when there is one.
type syncCollector struct{ s *syncer.Syncer }

func (c syncCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{syncLastDesc, syncDurationDesc, syncFailedDesc, syncObjectsDesc, syncFailedObjs, syncRequestsDesc} {
		ch <- d
	}
}

func (c syncCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.s.Last()
	if r == nil {
		return
	}
	failed := 0.0
	if r.Failed() {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(syncLastDesc, prometheus.GaugeValue, float64(r.Started.Add(r.Duration).UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(syncDurationDesc, prometheus.GaugeValue, r.Duration.Seconds())
	ch <- prometheus.MustNewConstMetric(syncFailedDesc, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(syncObjectsDesc, prometheus.GaugeValue, float64(len(r.Results)-r.Count(platform.ActionFailed)))
	ch <- prometheus.MustNewConstMetric(syncFailedObjs, prometheus.GaugeValue, float64(r.Count(platform.ActionFailed)+len(r.Problems)))
	if r.Requests >= 0 {
		ch <- prometheus.MustNewConstMetric(syncRequestsDesc, prometheus.GaugeValue, float64(r.Requests))
	}
}
