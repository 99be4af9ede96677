package kubesync

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// refuse says why git may not apply u, or "": the Guard's refusals (kinds,
// fluxd's own namespace and ServiceAccount), the inventory, and
// --sync-namespaces.
func (a *Applier) refuse(u *unstructured.Unstructured) string {
	if why := a.cfg.Guard.Refuse(u); why != "" {
		return why
	}
	gvk := u.GroupVersionKind()
	if gvk.Group == "" && gvk.Kind == "ConfigMap" && u.GetNamespace() == a.cfg.InventoryNamespace && u.GetName() == a.cfg.InventoryName {
		return "git may not write the sync's inventory ConfigMap (--sync-inventory): it is fluxd's list of what it may prune; rename the ConfigMap in git"
	}
	if len(a.cfg.Namespaces) > 0 {
		ns := u.GetNamespace()
		if gvk.Group == "" && gvk.Kind == "Namespace" {
			ns = u.GetName()
		}
		if ns != "" && !slices.Contains(a.cfg.Namespaces, ns) {
			return fmt.Sprintf("namespace %s is not one git may apply to (--sync-namespaces %s)", ns, strings.Join(a.cfg.Namespaces, ","))
		}
	}
	return ""
}
