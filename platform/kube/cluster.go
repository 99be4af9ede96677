package kube

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/platform/kube/gitguard"
)

// Config says how to reach the cluster and what to watch.
type Config struct {
	// Kubeconfig is a kubeconfig file. Empty means in-cluster config when
	// running in a pod, else $KUBECONFIG or ~/.kube/config.
	Kubeconfig string
	// Context is the kubeconfig context; empty means its current context.
	Context string
	// Namespaces limits what fluxd watches; empty means all namespaces.
	Namespaces []string
	// Resync is the informers' resync period; zero means never.
	Resync time.Duration
	// QPS and Burst bound the client's requests to the API server
	// (client-go's token bucket); zero keeps 50 and 100, well above
	// client-go's 5 and 10, which would make a release of many workloads
	// wait on its applies.
	QPS   float32
	Burst int
}

// Cluster reads workloads from informer caches.
type Cluster struct {
	client    kubernetes.Interface
	dynamic   dynamic.Interface
	host      string
	factories []informers.SharedInformerFactory
	deploys   []cacheLister
	// gen counts the informers' events: see Generation.
	gen atomic.Uint64

	// pingMu guards the API server check's last result, which Ready
	// reuses for pingTTL: probes of every replica come every few seconds
	// and need not each cost a request.
	pingMu  sync.Mutex
	pingAt  time.Time
	pingErr error

	// guard refuses what git may not apply (SetGuard); nil refuses
	// nothing.
	guard *gitguard.Guard
	// access keeps the answers of access reviews (access.go).
	access accessCache

	// helm is the HelmRelease informers, started once their CRD is
	// served (helm.go); namespaces and resync are theirs.
	helm       helmWatch
	namespaces []string
	resync     time.Duration
}

// SetGuard makes Apply refuse, as the sync does, a workload git may not
// apply: one in fluxd's own namespace, or one whose pods would run as
// fluxd's ServiceAccount. Call before the first Apply.
func (c *Cluster) SetGuard(g *gitguard.Guard) { c.guard = g }

// pingTTL is how long Ready reuses the API server check's result.
const pingTTL = 10 * time.Second

// Generation changes whenever a workload in the caches was added, changed
// or deleted: a reader that kept what Workloads said may keep it while
// Generation stays the same.
func (c *Cluster) Generation() uint64 { return c.gen.Load() }

// cacheLister is one namespace's (or all namespaces') listers.
type cacheLister struct {
	deployments  func() ([]*appsv1.Deployment, error)
	statefulsets func() ([]*appsv1.StatefulSet, error)
	daemonsets   func() ([]*appsv1.DaemonSet, error)
	cronjobs     func() ([]*batchv1.CronJob, error)
}

// podSpecs returns the pod templates of every workload in the caches.
func (l cacheLister) podSpecs() ([]podSpec, error) {
	var out []podSpec
	ds, err := l.deployments()
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		out = append(out, podSpec{d.Namespace, d.Spec.Template.Spec})
	}
	ss, err := l.statefulsets()
	if err != nil {
		return nil, err
	}
	for _, s := range ss {
		out = append(out, podSpec{s.Namespace, s.Spec.Template.Spec})
	}
	dss, err := l.daemonsets()
	if err != nil {
		return nil, err
	}
	for _, d := range dss {
		out = append(out, podSpec{d.Namespace, d.Spec.Template.Spec})
	}
	cjs, err := l.cronjobs()
	if err != nil {
		return nil, err
	}
	for _, cj := range cjs {
		out = append(out, podSpec{cj.Namespace, cj.Spec.JobTemplate.Spec.Template.Spec})
	}
	return out, nil
}

// RESTConfig builds a client configuration from cfg.
func RESTConfig(cfg Config) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cfg.Kubeconfig != "" {
		rules.ExplicitPath = cfg.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cfg.Context}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes client configuration: %w", err)
	}
	rc.UserAgent = "fluxd"
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	if rc.QPS <= 0 {
		rc.QPS = 50
	}
	if rc.Burst <= 0 {
		rc.Burst = 100
	}
	return rc, nil
}

// New returns a Cluster for the client configuration rc. Call Start before
// reading from it.
func New(rc *rest.Config, cfg Config) (*Cluster, error) {
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("creating Kubernetes client: %w", err)
	}
	c := newCluster(client, rc.Host, cfg)
	c.dynamic = dyn
	return c, nil
}

func newCluster(client kubernetes.Interface, host string, cfg Config) *Cluster {
	c := &Cluster{client: client, host: host, resync: cfg.Resync}
	c.helm.kick = make(chan struct{}, 1)
	namespaces := cfg.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{corev1.NamespaceAll}
	}
	c.namespaces = namespaces
	for _, ns := range namespaces {
		// The caches keep of each workload only what fluxd reads (slim.go).
		f := informers.NewSharedInformerFactoryWithOptions(client, cfg.Resync, informers.WithNamespace(ns), informers.WithTransform(slimCached))
		apps, batch := f.Apps().V1(), f.Batch().V1()
		d, s, ds, cj := apps.Deployments(), apps.StatefulSets(), apps.DaemonSets(), batch.CronJobs()
		// Touch each informer so the factory starts it, and count its
		// events for Generation.
		bump := func(any) { c.gen.Add(1) }
		events := cache.ResourceEventHandlerFuncs{AddFunc: bump, UpdateFunc: func(_, o any) { bump(o) }, DeleteFunc: bump}
		for _, inf := range []cache.SharedIndexInformer{d.Informer(), s.Informer(), ds.Informer(), cj.Informer()} {
			_, _ = inf.AddEventHandler(events)
		}
		c.factories = append(c.factories, f)
		c.deploys = append(c.deploys, cacheLister{
			deployments:  func() ([]*appsv1.Deployment, error) { return d.Lister().List(labels.Everything()) },
			statefulsets: func() ([]*appsv1.StatefulSet, error) { return s.Lister().List(labels.Everything()) },
			daemonsets:   func() ([]*appsv1.DaemonSet, error) { return ds.Lister().List(labels.Everything()) },
			cronjobs:     func() ([]*batchv1.CronJob, error) { return cj.Lister().List(labels.Everything()) },
		})
	}
	return c
}

// stripManagedFields drops a cached object's managedFields, which fluxd
// never reads from the cache (it applies server-side with its own field
// manager): they are often the biggest part of a workload's metadata, and
// the caches hold every workload fluxd watches.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Start starts the informers; they run until ctx is cancelled.
func (c *Cluster) Start(ctx context.Context) {
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	go c.watchHelm(ctx, c.namespaces, c.resync)
}

// WaitForSync waits until the informers' caches are filled, or ctx ends.
func (c *Cluster) WaitForSync(ctx context.Context) error {
	for _, f := range c.factories {
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return unreachable(c.host, fmt.Errorf("caches of %v did not sync", typ))
			}
		}
	}
	return nil
}

// Ping checks that the API server answers.
// (Discovery's ServerVersion takes no context, so an API server that
// accepts and never answers would hold it past ctx: the request is made
// here with ctx.)
func (c *Cluster) Ping(ctx context.Context) error {
	rc := c.client.Discovery().RESTClient()
	if rc == nil || reflect.ValueOf(rc).IsNil() {
		return ctx.Err() // a fake client, in tests
	}
	if err := rc.Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		return unreachable(c.host, err)
	}
	return nil
}

// Ready reports whether the informers' caches are synced and the API
// server answers within ctx, for readiness probes.
func (c *Cluster) Ready(ctx context.Context) error {
	synced := make(chan struct{})
	close(synced) // look, do not wait
	for _, f := range c.factories {
		for typ, ok := range f.WaitForCacheSync(synced) {
			if !ok {
				return fmt.Errorf("the cluster cache of %v is not synced", typ)
			}
		}
	}
	rc := c.client.Discovery().RESTClient()
	if rc == nil || reflect.ValueOf(rc).IsNil() {
		return nil // a fake client, in tests
	}
	c.pingMu.Lock()
	defer c.pingMu.Unlock()
	if !c.pingAt.IsZero() && time.Since(c.pingAt) < pingTTL {
		return c.pingErr
	}
	err := rc.Get().AbsPath("/version").Do(ctx).Error()
	if err != nil && ctx.Err() != nil {
		// The caller gave up: not the server's answer, not kept.
		return unreachable(c.host, err)
	}
	c.pingErr = nil
	if err != nil {
		c.pingErr = unreachable(c.host, err)
	}
	c.pingAt = time.Now()
	return c.pingErr
}

func unreachable(host string, err error) error {
	return fmt.Errorf("Kubernetes API server %s is not answering (%w); check --kubeconfig and --context, and that the cluster is up", host, err)
}

// Workloads lists every workload in the caches, sorted by ID.
func (c *Cluster) Workloads(ctx context.Context) ([]platform.Workload, error) {
	var out []platform.Workload
	var owned []*helmOwned
	for _, l := range c.deploys {
		ds, err := l.deployments()
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			w := fromDeployment(d)
			out = append(out, w)
			if o := helmOwner(d, w.Replicas); o != nil {
				owned = append(owned, o)
			}
		}
		ss, err := l.statefulsets()
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			w := fromStatefulSet(s)
			out = append(out, w)
			if o := helmOwner(s, w.Replicas); o != nil {
				owned = append(owned, o)
			}
		}
		dss, err := l.daemonsets()
		if err != nil {
			return nil, err
		}
		for _, d := range dss {
			w := fromDaemonSet(d)
			out = append(out, w)
			if o := helmOwner(d, w.Replicas); o != nil {
				owned = append(owned, o)
			}
		}
		cjs, err := l.cronjobs()
		if err != nil {
			return nil, err
		}
		for _, cj := range cjs {
			out = append(out, fromCronJob(cj))
		}
	}
	out = append(out, c.helmReleases(owned)...)
	slices.SortFunc(out, func(a, b platform.Workload) int { return a.ID.Compare(b.ID) })
	return out, ctx.Err()
}
