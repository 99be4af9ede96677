package kubesync

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// refuse says why git may not apply u, or "": the Guard's refusals (kinds,
// fluxd's own namespace and ServiceAccount, --sync-namespaces) and the
// inventory.
func (a *Applier) refuse(u *unstructured.Unstructured) string {
	if why := a.cfg.Guard.Refuse(u); why != "" {
		return why
	}
	gvk := u.GroupVersionKind()
	if gvk.Group == "" && gvk.Kind == "ConfigMap" && u.GetNamespace() == a.cfg.InventoryNamespace && u.GetName() == a.cfg.InventoryName {
		return "git may not write the sync's inventory ConfigMap (--sync-inventory): it is fluxd's list of what it may prune; rename the ConfigMap in git"
	}
	return ""
}
