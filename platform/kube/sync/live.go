package kubesync

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// liveView watches, metadata only, every kind the sync applies: one
// informer per resource (per namespace of the Guard's --sync-namespaces, whose RBAC
// may not reach further), started the first time a sync applies that
// kind and kept for the process's life. It is how a sync knows which
// objects changed in the cluster since fluxd applied them without asking
// for each: a List and a Watch per kind, once, instead of a dry run per
// object per sync.
//
// An informer that cannot list (no RBAC) or has not synced in time is
// not used: objects of its kind are dry-run one by one, as before.
type liveView struct {
	mc         metadata.Interface
	namespaces []string
	log        *slog.Logger
	ctx        context.Context // the view's life
	syncWait   time.Duration

	mu        sync.Mutex
	informers map[informerKey]cache.SharedIndexInformer
	waited    map[informerKey]bool // a sync waited for its first list
}

type informerKey struct {
	gvr schema.GroupVersionResource
	ns  string // "" for all namespaces, and for cluster-scoped kinds
}

func newLiveView(ctx context.Context, mc metadata.Interface, namespaces []string, log *slog.Logger) *liveView {
	return &liveView{mc: mc, namespaces: namespaces, log: log, ctx: ctx, syncWait: 30 * time.Second, informers: map[informerKey]cache.SharedIndexInformer{}, waited: map[informerKey]bool{}}
}

// keyFor is the informer that holds an object of gvr in ns.
func (v *liveView) keyFor(gvr schema.GroupVersionResource, namespaced bool, ns string) informerKey {
	if !namespaced || len(v.namespaces) == 0 {
		return informerKey{gvr: gvr}
	}
	return informerKey{gvr: gvr, ns: ns}
}

// ensure starts the informers of keys not started yet and waits (at most
// syncWait, or ctx) until they have listed; it returns those ready. An
// informer is waited for once: one that could not list then (no RBAC)
// is not waited for again, and is used once it has listed.
func (v *liveView) ensure(ctx context.Context, keys map[informerKey]bool) map[informerKey]cache.SharedIndexInformer {
	v.mu.Lock()
	for k := range keys {
		if _, ok := v.informers[k]; ok {
			continue
		}
		inf := metadatainformer.NewFilteredMetadataInformer(v.mc, k.gvr, k.ns, 0, cache.Indexers{}, nil).Informer()
		// Only what the witness needs is kept: not managedFields, nor
		// kubectl's copy of the whole object.
		_ = inf.SetTransform(func(obj any) (any, error) {
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				m.ManagedFields = nil
				if _, big := m.Annotations[lastApplied]; big {
					a := make(map[string]string, len(m.Annotations))
					for k, val := range m.Annotations {
						if k != lastApplied {
							a[k] = val
						}
					}
					m.Annotations = a
				}
			}
			return obj, nil
		})
		gvr := k.gvr
		_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
			v.log.Debug("watching a kind the sync applies failed; its objects are dry-run one by one until it works", "resource", gvr.String(), "error", err)
		})
		v.informers[k] = inf
		go inf.RunWithContext(v.ctx)
	}
	v.mu.Unlock()
	ready := map[informerKey]cache.SharedIndexInformer{}
	wctx, cancel := context.WithTimeout(ctx, v.syncWait)
	defer cancel()
	for k := range keys {
		v.mu.Lock()
		inf, waited := v.informers[k], v.waited[k]
		v.waited[k] = true
		v.mu.Unlock()
		if inf.HasSynced() || !waited && cache.WaitForCacheSync(wctx.Done(), inf.HasSynced) {
			ready[k] = inf
		}
	}
	return ready
}

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// get is an object's live metadata in inf, or nil when it does not exist.
func get(inf cache.SharedIndexInformer, ns, name string) *metav1.PartialObjectMetadata {
	key := name
	if ns != "" {
		key = ns + "/" + name
	}
	obj, ok, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	m, _ := obj.(*metav1.PartialObjectMetadata)
	return m
}

// countingTransport counts the requests the sync sends to the API server.
type countingTransport struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.rt.RoundTrip(r)
}
