package kubesync

import (
	"context"
	"fmt"

	"github.com/fluxcd/pkg/ssa"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxd/fluxd/platform"
)

// prune deletes (or, on a dry run, names) the inventory's objects that are
// no longer in git, when opts.Prune. It returns their results and the
// inventory entries to keep: those not deleted. held is why it deleted
// nothing though it could: git holds nothing, or more than half of the
// inventory (of more than one object) left it at once, as an empty
// checkout or a mistyped path would look, unless Config.PruneAll.
func (a *Applier) prune(ctx context.Context, inv inventory, items []*item, refused map[string]bool, opts platform.SyncOptions) (results []platform.ObjectResult, keep []entry, held error) {
	inGit := map[string]bool{}
	for k := range refused {
		inGit[k] = true // refused, so not fluxd's to delete either
	}
	for _, it := range items {
		inGit[it.key] = true
	}
	// Only prunable entries count: one fluxd adopted is forgotten when it
	// leaves git.
	var stale []entry
	prunable := 0
	for k, e := range inv.entries {
		if !e.Prune {
			continue
		}
		prunable++
		if !inGit[k] {
			stale = append(stale, e)
		}
	}
	if !opts.Prune || opts.NoPrune != "" {
		return nil, stale, nil // remembered, for a sync that may prune
	}
	if !a.cfg.PruneAll && len(stale) > 0 && (len(items) == 0 || len(stale) > 1 && 2*len(stale) > prunable) {
		return nil, stale, fmt.Errorf("pruning held back: git now holds %d objects and %d of the %d objects fluxd created would be deleted; an empty checkout, a wrong --git-path or branch, or a bad merge looks like this. Nothing was deleted; if the objects really left git, start fluxd once with --sync-prune-all", len(items), len(stale), prunable)
	}
	for _, e := range stale {
		res, kept := a.pruneOne(ctx, e.Ref, opts.DryRun)
		if res.Action != "" {
			results = append(results, res)
		}
		if kept {
			keep = append(keep, e)
		}
	}
	return results, keep, nil
}

// pruneOne deletes one object that left git, unless it opted out or
// fluxd no longer manages any of its fields (someone else took it over).
func (a *Applier) pruneOne(ctx context.Context, r platform.ObjectRef, dryRun bool) (res platform.ObjectResult, keep bool) {
	res = platform.ObjectResult{Ref: r}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvkOf(r))
	err := a.c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.Name}, live)
	if apierrors.IsNotFound(err) {
		return platform.ObjectResult{}, false // gone already: forgotten
	}
	if err != nil {
		res.Action, res.Error = platform.ActionFailed, fmt.Sprintf("not pruned: reading it failed: %v", applyError(err))
		return res, true
	}
	ann := live.GetAnnotations()[platform.AnnotationPrune]
	if ann == "disabled" {
		res.Action, res.Error = platform.ActionSkipped, ""
		return res, true
	}
	if why := notPrunedIgnored(live.GetAnnotations()); why != "" {
		res.Action, res.Error = platform.ActionSkipped, why
		return res, true
	}
	if gk := live.GroupVersionKind().GroupKind(); (gk.Kind == "Namespace" && gk.Group == "" || gk.Kind == "CustomResourceDefinition" && gk.Group == "apiextensions.k8s.io") &&
		!a.cfg.PruneNamespaces && ann != "enabled" {
		// Deleting one deletes everything in it (or every resource of
		// it), git's or not: only on request.
		res.Action, res.Error = platform.ActionSkipped, "not pruned: a "+gk.Kind+" that left git is deleted only with --sync-prune-namespaces or the annotation fluxd.io/prune: enabled, as deleting it deletes everything in it"
		return res, true
	}
	if !managedBy(live, FieldManager) {
		// Some other manager owns all of it now: not fluxd's to delete.
		return platform.ObjectResult{}, false
	}
	if dryRun {
		res.Action = platform.ActionDeleted
		return res, true
	}
	opts := ssa.DefaultDeleteOptions()
	opts.Exclusions = map[string]string{platform.AnnotationPrune: "disabled"}
	e, err := a.rm.Delete(ctx, live, opts)
	if err != nil {
		res.Action, res.Error = platform.ActionFailed, fmt.Sprintf("pruning failed: %v", applyError(err))
		return res, true
	}
	res.Action = action(e.Action)
	a.log.Info("pruned an object that left git", "object", r.String())
	return res, res.Action != platform.ActionDeleted
}

func managedBy(u *unstructured.Unstructured, manager string) bool {
	for _, f := range u.GetManagedFields() {
		if f.Manager == manager {
			return true
		}
	}
	return false
}
