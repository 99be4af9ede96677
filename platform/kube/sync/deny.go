package kubesync

import (
	"fmt"
	"strings"

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
	if gvk.Group == "" && gvk.Kind == "ConfigMap" && u.GetNamespace() == a.cfg.InventoryNamespace && a.isShard(u.GetName()) {
		return fmt.Sprintf("git may not write the sync's inventory ConfigMaps (--sync-inventory %s/%s, and %s-N for its shards): they are fluxd's list of what it may prune; rename the ConfigMap in git", a.cfg.InventoryNamespace, a.cfg.InventoryName, a.cfg.InventoryName)
	}
	return ""
}

// isShard says whether name is one of the inventory's ConfigMaps: NAME,
// or NAME-N for any N, whether or not the inventory has that many shards
// now (it may have tomorrow).
func (a *Applier) isShard(name string) bool {
	if name == a.cfg.InventoryName {
		return true
	}
	n, ok := strings.CutPrefix(name, a.cfg.InventoryName+"-")
	return ok && n != "" && strings.Trim(n, "0123456789") == ""
}
