package kubesync

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fluxd/fluxd/platform"
)

// The inventory is a ConfigMap holding, under inventoryKey, the JSON list
// of the objects the sync applied. Pruning deletes only objects listed
// there: an object fluxd never applied is never its to delete.
const inventoryKey = "objects.json"

// The inventory names the source it lists objects of (git URL, branch,
// paths: Config.Source) and a hash of it, so that two fluxd instances (or
// one whose --git-path changed) given the same ConfigMap do not prune
// each other's objects: a sync finding another source's inventory applies
// but neither prunes nor rewrites it.
const (
	annotationSource = "fluxd.io/sync-source"
	annotationOwner  = "fluxd.io/sync-owner"
)

// OwnerOf is the owner hash of source, as the inventory stores it.
func OwnerOf(source string) string {
	sum := sha256.Sum256([]byte(source))
	return hex.EncodeToString(sum[:8])
}

// foreignInventoryError is an inventory another source wrote.
type foreignInventoryError struct {
	ns, name, theirs, ours string
}

func (e *foreignInventoryError) Error() string {
	return fmt.Sprintf("the sync inventory ConfigMap %s/%s lists the objects of another source (%s), not of this fluxd's (%s): another fluxd shares it, or --git-url, --git-branch or --git-path changed; this sync applied git but pruned nothing and left the inventory alone. Give each fluxd its own --sync-inventory (the default is derived from the source), or delete the ConfigMap if that source is gone (nothing it lists will then be pruned)", e.ns, e.name, e.theirs, e.ours)
}

// inventory maps object keys to their refs.
type inventory map[string]platform.ObjectRef

func (a *Applier) readInventory(ctx context.Context) (inventory, error) {
	var cm corev1.ConfigMap
	err := a.c.Get(ctx, client.ObjectKey{Namespace: a.cfg.InventoryNamespace, Name: a.cfg.InventoryName}, &cm)
	if apierrors.IsNotFound(err) {
		return inventory{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the sync inventory ConfigMap %s/%s: %w (fluxd needs get, create and patch on it)", a.cfg.InventoryNamespace, a.cfg.InventoryName, err)
	}
	if owner := cm.Annotations[annotationOwner]; owner != "" && owner != OwnerOf(a.cfg.Source) {
		theirs := cm.Annotations[annotationSource]
		if theirs == "" {
			theirs = "owner " + owner
		}
		return nil, &foreignInventoryError{ns: a.cfg.InventoryNamespace, name: a.cfg.InventoryName, theirs: theirs, ours: a.cfg.Source}
	}
	var refs []platform.ObjectRef
	if raw := cm.Data[inventoryKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &refs); err != nil {
			return nil, fmt.Errorf("the sync inventory ConfigMap %s/%s does not parse (%w); fluxd will not prune until it is fixed or deleted (deleting it makes fluxd forget what it applied, so nothing is pruned until it is applied again)", a.cfg.InventoryNamespace, a.cfg.InventoryName, err)
		}
	}
	inv := inventory{}
	for _, r := range refs {
		inv[refKey(r)] = r
	}
	return inv, nil
}

// writeInventory stores inv, creating the ConfigMap the first time.
func (a *Applier) writeInventory(ctx context.Context, inv inventory) error {
	refs := make([]platform.ObjectRef, 0, len(inv))
	for _, r := range inv {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	b, err := json.Marshal(refs)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: a.cfg.InventoryNamespace, Name: a.cfg.InventoryName, Labels: map[string]string{"app.kubernetes.io/managed-by": "fluxd"},
			Annotations: map[string]string{annotationSource: a.cfg.Source, annotationOwner: OwnerOf(a.cfg.Source)}},
		Data: map[string]string{inventoryKey: string(b)},
	}
	if err := a.c.Patch(ctx, cm, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("writing the sync inventory ConfigMap %s/%s: %w", a.cfg.InventoryNamespace, a.cfg.InventoryName, err)
	}
	return nil
}

// inventoryAfter is the inventory once a sync is done: the objects of git
// this sync created, those listed already, those of git annotated
// fluxd.io/prune: enabled, and the old entries that were kept (not
// pruned, or not yet). An object of git that existed before fluxd applied
// it (adopted: its first apply changed it or found it unchanged) is not
// listed, so pruning never deletes what fluxd did not create.
func inventoryAfter(old inventory, items []*item, keep []platform.ObjectRef) inventory {
	inv := inventory{}
	for _, it := range items {
		r, listed := old[it.key]
		switch it.res.Action {
		case platform.ActionFailed, platform.ActionSkipped:
			if listed {
				inv[it.key] = r
			}
		case platform.ActionCreated:
			inv[it.key] = refOf(it.u)
		default:
			if listed || it.u.GetAnnotations()[platform.AnnotationPrune] == "enabled" {
				inv[it.key] = refOf(it.u)
			}
		}
	}
	for _, r := range keep {
		inv[refKey(r)] = r
	}
	return inv
}

func refKey(r platform.ObjectRef) string {
	gvk := gvkOf(r)
	return gvk.Group + "/" + gvk.Kind + "/" + r.Namespace + "/" + r.Name
}
