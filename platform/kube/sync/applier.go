package kubesync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/polling"
	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/fluxcd/cli-utils/pkg/object"
	"github.com/fluxcd/pkg/ssa"
	ssaerrors "github.com/fluxcd/pkg/ssa/errors"
	ssautils "github.com/fluxcd/pkg/ssa/utils"
	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/platform/kube/gitguard"
)

// FieldManager is fluxd's server-side apply field manager; a release
// applies as the same one (platform/kube.FieldManager).
const FieldManager = "fluxd"

// Config configures an Applier.
type Config struct {
	// InventoryNamespace and InventoryName name the ConfigMap that lists
	// the objects the sync applied: what pruning may delete.
	InventoryNamespace string
	InventoryName      string
	// Source names what the sync applies (redacted git URL, branch,
	// paths); the inventory is stamped with it and a sync refuses to
	// prune by, or rewrite, an inventory stamped with another.
	Source string
	// PruneNamespaces lets pruning delete Namespaces and
	// CustomResourceDefinitions (and so everything in them); without it
	// only one annotated fluxd.io/prune: enabled is.
	PruneNamespaces bool
	// PruneAll lets a sync prune when git holds nothing or more than
	// half of the inventory left git at once (held back otherwise).
	PruneAll bool
	// Guard refuses what git may not apply (kinds such as
	// ClusterRole.rbac.authorization.k8s.io, fluxd's own namespace and
	// ServiceAccount, namespaces outside --sync-namespaces): a commit
	// holding one fails that object, and the sync leaves such objects
	// alone. nil refuses nothing. The sync watches only the Guard's
	// namespaces, when it names some.
	Guard *gitguard.Guard
	// WaitTimeout bounds the wait for CRDs and Namespaces to be
	// established before the objects that need them are applied; zero
	// means one minute.
	WaitTimeout time.Duration
	// Concurrency is how many objects are dry-run at once; zero means 8.
	Concurrency int
}

// Validate reports every problem of c.
func (c Config) Validate() error {
	var errs []error
	if c.InventoryNamespace == "" || c.InventoryName == "" {
		errs = append(errs, errors.New("the sync inventory needs a namespace and a name (--sync-inventory NAMESPACE/NAME)"))
	}
	if c.WaitTimeout < 0 || c.Concurrency < 0 {
		errs = append(errs, errors.New("the sync's wait timeout and concurrency cannot be negative"))
	}
	return errors.Join(errs...)
}

// Applier applies sets of objects to one cluster.
type Applier struct {
	cfg  Config
	c    client.Client
	rm   *ssa.ResourceManager
	log  *slog.Logger
	live *liveView  // the applied kinds' metadata, watched
	seen *witnesses // what the API server answered this sync
	// warned are the Guard's warnings already logged (warnOnce).
	warned sync.Map
	// requests counts every request sent to the API server.
	requests atomic.Int64
	stop     context.CancelFunc // ends the informers
}

// New returns an Applier for the cluster rc reaches.
func New(rc *rest.Config, cfg Config, log *slog.Logger) (*Applier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = time.Minute
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 8
	}
	// controller-runtime logs through a global logger and prints a
	// stack trace when none was set: hand it the sync's.
	setLoggerOnce.Do(func() { ctrllog.SetLogger(logr.FromSlogHandler(log.With("component", "sync").Handler())) })
	a := &Applier{cfg: cfg, log: log.With("component", "sync"), seen: &witnesses{}}
	rc = rest.CopyConfig(rc)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt: rt, n: &a.requests} })
	// The client's REST mapper is controller-runtime's dynamic one: it
	// learns a kind a CRD of this very sync brought. Every read and
	// apply through it notes the object's witness.
	base, err := client.NewWithWatch(rc, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("creating the sync's Kubernetes client: %w", err)
	}
	a.c = interceptor.NewClient(base, interceptor.Funcs{Get: a.seen.get, Patch: a.seen.patch})
	mc, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("creating the sync's Kubernetes metadata client: %w", err)
	}
	var ctx context.Context
	ctx, a.stop = context.WithCancel(context.Background())
	a.live = newLiveView(ctx, mc, cfg.Guard.Namespaces(), a.log)
	poller := polling.NewStatusPoller(a.c, a.c.RESTMapper(), polling.Options{})
	a.rm = ssa.NewResourceManager(a.c, poller, ssa.Owner{Field: FieldManager, Group: "fluxd.io"})
	a.rm.SetConcurrency(cfg.Concurrency)
	return a, nil
}

// Close stops watching the cluster.
func (a *Applier) Close() { a.stop() }

// Requests is how many requests the Applier has sent to the API server,
// its informers' lists and watches included.
func (a *Applier) Requests() int64 { return a.requests.Load() }

var setLoggerOnce sync.Once

// item is one object on its way to the cluster.
type item struct {
	src platform.Object
	u   *unstructured.Unstructured
	key string
	res *platform.ObjectResult
	// unscoped is set while the cluster does not know the kind: whether
	// it is namespaced (and so its key) cannot be told.
	unscoped bool
	// digest is its rendered form's; change how it stands against the
	// inventory and the cluster (change.go); witness what the cluster
	// said of it after this sync, when it said anything.
	digest   string
	change   change
	witness  witness
	informer informerKey
	watched  bool
	// liveIgnore names Flux v1's ignore annotation when the object in
	// the cluster carries it with "true" (ignore.go).
	liveIgnore string
}

// Apply applies objs (or, with opts.DryRun, says what applying them would
// do), then prunes what left git when opts.Prune. It returns one result
// per object, pruned ones included, sorted by object; an object that
// failed has Action failed and its error. err is for a failure of the
// sync as a whole: the inventory cannot be read or belongs to another
// source, in which case the objects are applied all the same but nothing
// is pruned and the inventory is left as it is.
func (a *Applier) Apply(ctx context.Context, objs []platform.Object, opts platform.SyncOptions) ([]platform.ObjectResult, error) {
	inv, invErr := a.readInventory(ctx)
	if invErr != nil {
		inv = newInventory()
		opts.NoPrune = "the inventory could not be used"
	}
	a.seen.reset()
	ms := &mappings{m: a.c.RESTMapper()}
	items, results, refused := a.prepare(objs, ms, opts.Owned)
	a.leaveReplicasToAutoscalers(ctx, items, opts.DryRun)
	var defs, classes, rest []*item
	for _, it := range items {
		switch {
		case ssautils.IsClusterDefinition(it.u):
			defs = append(defs, it)
		case ssautils.IsClassDefinition(it.u):
			classes = append(classes, it)
		default:
			rest = append(rest, it)
		}
	}
	preempted := false
	for i, stage := range [][]*item{defs, classes, rest} {
		if len(stage) == 0 {
			continue
		}
		if i == 2 {
			kept := stage[:0]
			for _, it := range stage {
				a.scopeOne(it, ms) // kinds a CRD of this sync brought are known now
				if why := a.refuse(it.u); why != "" {
					// Its namespace was set only now (default).
					it.res.Action, it.res.Error = platform.ActionFailed, why
					refused[it.key] = true
					continue
				}
				kept = append(kept, it)
			}
			stage = kept
		}
		a.classify(ctx, inv, stage, ms)
		stage = leaveIgnored(stage)
		for _, it := range stage {
			if it.change == changeNone {
				it.res.Action, it.witness = platform.ActionUnchanged, inv.entries[it.key].Witness
			}
		}
		if opts.DryRun {
			var look []*item
			for _, it := range stage {
				if it.change != changeNone {
					look = append(look, it)
				}
			}
			a.diff(ctx, look, crdKinds(defs))
		} else {
			var slow []*item
			slow, preempted = a.quick(ctx, stage, inv, opts.Yield)
			if !preempted {
				preempted = a.apply(ctx, slow, opts.Yield)
			}
			for _, it := range slow {
				if it.res.Action != "" {
					it.witness = a.seen.of(it.key)
				}
			}
		}
		if preempted {
			break
		}
		if i < 2 && !opts.DryRun {
			a.wait(ctx, stage)
		}
	}
	if preempted {
		opts.NoPrune = "the sync stopped for a release"
	}
	for _, it := range items {
		if it.res.Action == "" {
			it.res.Action, it.res.Error = platform.ActionSkipped, "not applied yet: the sync stopped for a release, and applies it next"
		}
		results = append(results, *it.res)
	}
	for _, it := range items {
		if it.unscoped && opts.NoPrune == "" {
			// Its key may not match its inventory entry, which would then
			// look like an object that left git.
			opts.NoPrune = fmt.Sprintf("the cluster does not know the kind of %s, so whether it is namespaced cannot be told", it.res.Ref)
		}
	}
	pruned, keep, held := a.prune(ctx, inv, items, refused, opts)
	results = append(results, pruned...)
	sort.SliceStable(results, func(i, j int) bool { return results[i].Ref.String() < results[j].Ref.String() })
	if invErr != nil {
		return results, invErr
	}
	if !opts.DryRun {
		// Written even when the caller left: what was applied is listed.
		if err := a.writeInventory(context.WithoutCancel(ctx), inventoryAfter(inv, items, keep)); err != nil {
			return results, err
		}
	}
	if preempted {
		return results, platform.ErrPreempted
	}
	return results, held
}

// prepare turns objects into unstructured ones, with the namespace a
// namespaced object left out set to "default" as kubectl would, and fails
// the second definition of one object.
func (a *Applier) prepare(objs []platform.Object, ms *mappings, owned bool) ([]*item, []platform.ObjectResult, map[string]bool) {
	var items []*item
	var failed []platform.ObjectResult
	refused := map[string]bool{}
	seen := map[string]*item{}
	for _, o := range objs {
		m := o.Manifest
		if !owned {
			m = deepCopy(m)
		}
		u := &unstructured.Unstructured{Object: m}
		it := &item{src: o, u: u, res: &platform.ObjectResult{Ref: o.Ref(), Where: o.Where()}}
		a.scopeOne(it, ms)
		it.key = keyOf(u)
		if why := a.refuse(u); why != "" {
			// Not applied, and not pruned either: left alone.
			it.res.Action, it.res.Error = platform.ActionFailed, why
			failed = append(failed, *it.res)
			refused[it.key] = true
			continue
		}
		if why := ignoredInGit(u.GetAnnotations()); why != "" {
			// Not applied, and not pruned either: left alone.
			it.res.Action, it.res.Error = platform.ActionSkipped, why
			failed = append(failed, *it.res)
			refused[it.key] = true
			continue
		}
		if prev, ok := seen[it.key]; ok {
			it.res.Action, it.res.Error = platform.ActionFailed, fmt.Sprintf("is defined twice, in %s and in %s; remove one of them", prev.src.Where(), o.Where())
			failed = append(failed, *it.res)
			continue
		}
		seen[it.key] = it
		items = append(items, it)
		a.warnOnce(it)
	}
	return items, failed, refused
}

// warnOnce logs what the Guard warns of an object git may apply (a
// HelmRelease its controller installs as itself), once per object and
// warning while fluxd runs, not at every sync.
func (a *Applier) warnOnce(it *item) {
	w := a.cfg.Guard.Warn(it.u)
	if w == "" {
		return
	}
	if _, dup := a.warned.LoadOrStore(it.key+"\x00"+w, true); !dup {
		a.log.Warn(w, "object", it.res.Ref.String(), "file", it.src.Where())
	}
}

// scopeOne sets the default namespace on a namespaced object without one,
// and clears the namespace of a cluster-scoped one, when the cluster
// knows the kind (a kind a CRD of this sync brings is looked at again
// after the CRD is applied).
func (a *Applier) scopeOne(it *item, ms *mappings) {
	m, err := ms.of(it.u.GroupVersionKind())
	it.unscoped = err != nil
	if err != nil {
		return
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if it.u.GetNamespace() == "" {
			it.u.SetNamespace("default")
		}
	} else if it.u.GetNamespace() != "" {
		it.u.SetNamespace("")
	}
	it.res.Ref = refOf(it.u)
	it.key = keyOf(it.u)
}

// mappings asks the REST mapper once per kind within one Apply: at
// 10,000 objects of three kinds, asking per object was a third of a
// no-change sync's CPU (the mapper's lookups through its layers, each
// allocating). Only answers are kept: a kind the cluster does not know
// yet is asked again, since a CRD of the same sync may bring it.
type mappings struct {
	m    meta.RESTMapper
	memo map[schema.GroupVersionKind]*meta.RESTMapping
}

func (ms *mappings) of(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	if m, ok := ms.memo[gvk]; ok {
		return m, nil
	}
	m, err := ms.m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	if ms.memo == nil {
		ms.memo = map[schema.GroupVersionKind]*meta.RESTMapping{}
	}
	ms.memo[gvk] = m
	return m, nil
}

// apply applies one stage: all at once through ssa.ApplyAll, and when
// that fails (one object refused fails the batch), object by object, so
// that the others are applied and the refused one is named.
//
// With yield, the stage goes in batches, yield asked before each: once it
// says so, the rest is left (Action "") and it returns true.
func (a *Applier) apply(ctx context.Context, stage []*item, yield func() bool) (preempted bool) {
	if yield == nil || len(stage) <= yieldBatch {
		if len(stage) > 0 && (yield == nil || !yield()) {
			a.applyBatch(ctx, stage)
			return false
		}
		return len(stage) > 0
	}
	for i := 0; i < len(stage); i += yieldBatch {
		if yield() {
			return true
		}
		a.applyBatch(ctx, stage[i:min(i+yieldBatch, len(stage))])
	}
	return false
}

// yieldBatch is how many objects the slow way applies between asking
// whether to yield: each costs a read and a dry run.
const yieldBatch = 20

func (a *Applier) applyBatch(ctx context.Context, stage []*item) {
	us := make([]*unstructured.Unstructured, len(stage))
	for i, it := range stage {
		us[i] = it.u
	}
	opts := ssa.DefaultApplyOptions()
	cs, err := a.rm.ApplyAll(ctx, us, opts)
	if err == nil {
		a.record(stage, cs.Entries)
		return
	}
	a.log.Debug("a batch apply failed; applying object by object", "error", err)
	for _, it := range stage {
		e, err := a.rm.Apply(ctx, it.u, opts)
		if why := readByFluxd(it.u, err); why != "" {
			it.res.Action, it.res.Error = platform.ActionSkipped, why
			continue
		}
		if err != nil {
			it.res.Action, it.res.Error = platform.ActionFailed, applyError(err)
			continue
		}
		it.res.Action = action(e.Action)
	}
}

// diff says what applying one stage would do, object by object. A custom
// resource of a kind a CRD of this sync brings cannot be dry-run before
// the CRD exists: it would be created.
func (a *Applier) diff(ctx context.Context, stage []*item, newKinds map[schema.GroupKind]bool) {
	for _, it := range stage {
		e, live, merged, err := a.rm.Diff(ctx, it.u.DeepCopy(), ssa.DefaultDiffOptions())
		if err != nil && newKinds[it.u.GroupVersionKind().GroupKind()] && (meta.IsNoMatchError(err) || strings.Contains(err.Error(), "no matches for kind")) {
			it.res.Action, it.res.Diff = platform.ActionCreated, []string{"(after its CustomResourceDefinition, which this sync creates)"}
			continue
		}
		if why := readByFluxd(it.u, err); why != "" {
			it.res.Action, it.res.Error = platform.ActionSkipped, why
			continue
		}
		if err != nil {
			it.res.Action, it.res.Error = platform.ActionFailed, applyError(err)
			continue
		}
		it.res.Action = action(e.Action)
		if live != nil && merged != nil {
			it.res.Diff = fieldDiff(live.Object, merged.Object)
		}
	}
}

// record copies a change set's actions to the stage's results.
func (a *Applier) record(stage []*item, entries []ssa.ChangeSetEntry) {
	byKey := map[string]ssa.Action{}
	for _, e := range entries {
		byKey[metaKey(e.ObjMetadata)] = e.Action
	}
	for _, it := range stage {
		if act, ok := byKey[it.key]; ok {
			it.res.Action = action(act)
		} else {
			it.res.Action = platform.ActionUnchanged
		}
	}
}

// wait waits for a stage's CRDs to be established and its Namespaces to
// be active. A timeout fails those objects; the next stage goes on, and
// whatever needs them fails with its own error.
func (a *Applier) wait(ctx context.Context, stage []*item) {
	var set object.ObjMetadataSet
	var waited []*item
	for _, it := range stage {
		if it.res.Action == platform.ActionCreated || it.res.Action == platform.ActionChanged {
			set = append(set, object.UnstructuredToObjMetadata(it.u))
			waited = append(waited, it)
		}
	}
	if len(set) == 0 {
		return
	}
	err := a.rm.WaitForSetWithContext(ctx, set, ssa.WaitOptions{Interval: 500 * time.Millisecond, Timeout: a.cfg.WaitTimeout})
	if err == nil {
		return
	}
	a.log.Warn("waiting for definitions to be established failed", "error", err)
	// Which ones: each object's own status, not its name in the error.
	for _, it := range waited {
		why := a.notCurrent(ctx, it.u)
		if why != "" {
			it.res.Action, it.res.Error = platform.ActionFailed, fmt.Sprintf("applied, but not established within %s: %s", a.cfg.WaitTimeout, why)
		}
	}
}

// notCurrent says why u is not established in the cluster (kstatus), or
// "" when it is.
func (a *Applier) notCurrent(ctx context.Context, u *unstructured.Unstructured) string {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	if err := a.c.Get(context.WithoutCancel(ctx), client.ObjectKeyFromObject(u), live); err != nil {
		return applyError(err)
	}
	res, err := kstatus.Compute(live)
	if err != nil {
		return err.Error()
	}
	if res.Status == kstatus.CurrentStatus {
		return ""
	}
	return fmt.Sprintf("status %s: %s", res.Status, res.Message)
}

func action(a ssa.Action) string {
	switch a {
	case ssa.CreatedAction:
		return platform.ActionCreated
	case ssa.ConfiguredAction:
		return platform.ActionChanged
	case ssa.DeletedAction:
		return platform.ActionDeleted
	case ssa.SkippedAction:
		return platform.ActionSkipped
	}
	return platform.ActionUnchanged
}

// fluxImageGroup is Flux v2's image automation API group, whose objects
// fluxd reads from git itself (gitrepo's ImagePolicy services).
const fluxImageGroup = "image.toolkit.fluxcd.io"

// readByFluxd is why an object the cluster cannot take is left out of the
// sync rather than failed, or "": Flux v2's ImageRepository, ImagePolicy
// and ImageUpdateAutomation where Flux v2's image controllers (their
// CRDs) are not installed. A repository moved to fluxd keeps them in git,
// and fluxd honours them from there; a sync failing on them every
// interval would say something is wrong when nothing is.
func readByFluxd(u *unstructured.Unstructured, err error) string {
	if err == nil || u.GroupVersionKind().Group != fluxImageGroup || !(meta.IsNoMatchError(err) || strings.Contains(err.Error(), "no matches for kind")) {
		return ""
	}
	return "not applied: the cluster does not serve " + fluxImageGroup + " (Flux v2's image controllers are not installed); fluxd reads this " + u.GetKind() + " from git and honours it itself (docs/migrate.md)"
}

// applyError says why the API server refused an object, with a hint for
// the common causes. The object is named beside the error already, so
// ssa's own prefix naming it again is left out.
func applyError(err error) string {
	var dry *ssaerrors.DryRunErr
	if errors.As(err, &dry) && dry.Unwrap() != nil && !apierrors.IsNotFound(dry.Unwrap()) {
		err = dry.Unwrap()
	}
	msg := err.Error()
	switch {
	case meta.IsNoMatchError(err) || strings.Contains(msg, "no matches for kind"):
		return msg + " (the cluster does not know this kind: is its CustomResourceDefinition in git, or its API version misspelt?)"
	case apierrors.IsForbidden(err) && strings.Contains(msg, " cannot "):
		return msg + " (fluxd's service account may not apply it: grant it in fluxd's RBAC)"
	case apierrors.IsInvalid(err):
		return msg + " (the API server refused the object as written: fix it in git)"
	}
	return msg
}

func keyOf(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + "/" + u.GetNamespace() + "/" + u.GetName()
}

func metaKey(m object.ObjMetadata) string {
	return m.GroupKind.Group + "/" + m.GroupKind.Kind + "/" + m.Namespace + "/" + m.Name
}

func refOf(u *unstructured.Unstructured) platform.ObjectRef {
	return platform.ObjectRef{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

func gvkOf(r platform.ObjectRef) schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(r.APIVersion, r.Kind)
}

// deepCopy copies a decoded manifest, whose values are all JSON's (the
// YAML decoder makes numbers int64 or float64), so that the apply's
// defaulting never writes into git's copy.
func deepCopy(m map[string]any) map[string]any {
	return runtime.DeepCopyJSON(m)
}

// crdKinds are the kinds the CRDs among items define.
func crdKinds(items []*item) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, it := range items {
		if !ssautils.IsCRD(it.u) {
			continue
		}
		group, _, _ := unstructured.NestedString(it.u.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(it.u.Object, "spec", "names", "kind")
		out[schema.GroupKind{Group: group, Kind: kind}] = true
	}
	return out
}
