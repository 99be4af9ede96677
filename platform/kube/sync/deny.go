package kubesync

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// DefaultDenyKinds are the kinds git may not apply unless --sync-deny-kinds
// says otherwise: cluster-wide RBAC and admission control, with which a
// commit could grant itself (or anyone) more than fluxd's namespaces, or
// intercept every request to the API server.
var DefaultDenyKinds = []string{
	"ClusterRole.rbac.authorization.k8s.io",
	"ClusterRoleBinding.rbac.authorization.k8s.io",
	"MutatingWebhookConfiguration.admissionregistration.k8s.io",
	"ValidatingWebhookConfiguration.admissionregistration.k8s.io",
	"ValidatingAdmissionPolicy.admissionregistration.k8s.io",
	"ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io",
}

// refuse says why git may not apply u, or "".
func (a *Applier) refuse(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	for _, d := range a.cfg.DenyKinds {
		kind, group, _ := strings.Cut(d, ".")
		if strings.EqualFold(kind, gvk.Kind) && (group == "" || group == gvk.Group) {
			return fmt.Sprintf("git may not apply a %s (--sync-deny-kinds lists %s): fluxd applies it for whoever can push to git, so cluster-wide RBAC and admission control are refused unless the flag allows them; apply it by hand, or start fluxd with a --sync-deny-kinds that leaves it out", gvk.Kind, d)
		}
	}
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
