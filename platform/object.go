package platform

import (
	"errors"
	"fmt"
)

// Object is one Kubernetes object of any kind, as git defines it, for the
// sync: its decoded manifest and where it was written, so that a problem
// with it names the file and line to fix.
type Object struct {
	// File is the file's path relative to the repository root; for an
	// object kustomize built, the directory holding kustomization.yaml.
	File string
	// Line is where the object starts in File (0 when unknown, as for
	// kustomize's output).
	Line int
	// Manifest is the object, decoded from YAML or JSON.
	Manifest map[string]any
}

// Where is "file:line", or "file" when the line is unknown.
func (o Object) Where() string {
	if o.Line > 0 {
		return fmt.Sprintf("%s:%d", o.File, o.Line)
	}
	return o.File
}

// Ref names the object.
func (o Object) Ref() ObjectRef {
	ref := ObjectRef{}
	ref.APIVersion, _ = o.Manifest["apiVersion"].(string)
	ref.Kind, _ = o.Manifest["kind"].(string)
	if md, ok := o.Manifest["metadata"].(map[string]any); ok {
		ref.Namespace, _ = md["namespace"].(string)
		ref.Name, _ = md["name"].(string)
	}
	return ref
}

// ObjectRef names a Kubernetes object. Namespace is empty for a
// cluster-scoped object.
type ObjectRef struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
}

// String is "Kind/namespace/name", or "Kind/name" for a cluster-scoped
// object, as Flux prints them.
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// Workload is the ID of the workload r names, if it names one.
func (r ObjectRef) Workload() (ID, bool) {
	id, err := ParseID(r.Namespace + ":" + r.Kind + "/" + r.Name)
	if err != nil || r.Namespace == "" {
		return ID{}, false
	}
	return id, true
}

// The actions a sync takes on an object.
const (
	ActionCreated   = "created"
	ActionChanged   = "configured"
	ActionUnchanged = "unchanged"
	ActionDeleted   = "deleted"
	ActionSkipped   = "skipped"
	ActionFailed    = "failed"
)

// ObjectResult is what a sync did, or would do, to one object.
type ObjectResult struct {
	Ref ObjectRef
	// Where is the object's file:line in git; empty for an object pruned
	// from the cluster.
	Where string
	// Action is one of the Action constants.
	Action string
	// Autoscaled is set for a workload an HorizontalPodAutoscaler
	// targets: its replicas are the autoscaler's, not git's.
	Autoscaled bool
	// Error says why the object failed; empty unless Action is failed.
	Error string
	// Diff lists, for a change, the fields that differ between the
	// cluster and git (dry runs only).
	Diff []string
}

// AnnotationPrune, set to "disabled" on an object in the cluster, keeps
// the sync from deleting it when it leaves git. Set to "enabled" (in git
// or in the cluster) it opts in to pruning an object fluxd did not create
// (one that existed before git declared it), or a Namespace or
// CustomResourceDefinition without --sync-prune-namespaces.
const AnnotationPrune = "fluxd.io/prune"

// SyncOptions say what a sync may do.
type SyncOptions struct {
	// Prune deletes the objects of the inventory that are no longer in
	// git.
	Prune bool
	// DryRun changes nothing: it reports what a sync would do.
	DryRun bool
	// NoPrune is why pruning is held back this time, e.g. a file that
	// could not be read (whose objects would look deleted); "" when not.
	NoPrune string
	// Yield, when set, is asked between objects whether the sync should
	// stop and let something else (a release) apply first; when it says
	// so, the sync returns ErrPreempted with what it applied so far, and
	// prunes nothing.
	Yield func() bool
	// Owned hands the objects to the applier, which then changes them
	// in place (a default namespace, fluxd's labels) rather than applying
	// copies: the sync reads its objects from git for each sync and drops
	// them after. At 10,000 objects the copies were a quarter of the
	// start-up peak of the heap. A caller that uses its objects again
	// leaves it unset.
	Owned bool
}

// ErrPreempted is a sync that stopped between objects for a release: the
// caller lets the release apply, then syncs again from git.
var ErrPreempted = errors.New("the sync stopped between objects to let a release apply first")
