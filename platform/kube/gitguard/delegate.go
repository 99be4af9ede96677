package gitguard

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Some objects make another controller apply things: a Flux Kustomization
// or HelmRelease, an Argo CD Application or ApplicationSet. Those
// controllers often run as cluster-admin, and apply whatever their source
// holds: ClusterRoleBindings, webhooks, objects in fluxd's namespace or in
// any other. Checking the object alone would let git delegate around every
// limit the Guard keeps, so such an object passes only when what its
// controller applies is pinned to those limits:
//
//   - a Flux Kustomization needs spec.serviceAccountName (the controller
//     then applies as that ServiceAccount of the Kustomization's
//     namespace, and its RBAC bounds what is applied, cluster-scoped
//     objects included; one that may do anything, Config.Admin, pins
//     nothing) and spec.targetNamespace (every namespaced object
//     lands there, and that namespace passes the Guard's own namespace
//     rules); never spec.kubeConfig (another cluster, where none hold);
//   - a Flux HelmRelease installs into its own namespace, or its
//     targetNamespace and storageNamespace, each held to the namespace
//     rules. fluxd releases HelmReleases, so one without a
//     serviceAccountName still passes, with a warning (Warn): its chart is
//     installed as helm-controller; so does one that names an admin.
//     Under --sync-namespaces, or while an instance has a scope, fluxd
//     promises namespaces, and then a non-admin one is required. Flux v1's (helm.fluxcd.io) cannot name one: it is then
//     refused. Never spec.kubeConfig;
//   - an Argo CD Application needs a spec.destination.namespace that
//     passes the namespace rules, on this cluster (no other
//     destination.server or destination.name), and a spec.project other
//     than "default": Argo CD's destination namespace is only the default
//     for objects that name none, so the project (its destinations, its
//     cluster resource allow-list) is what bounds it, and "default", as
//     Argo CD installs it, allows everything. An ApplicationSet is held to
//     the same on spec.template.spec, with no templatePatch and no
//     template expression ({{ }}) in those fields, which would let each
//     generated Application choose its own;
//   - an Argo CD AppProject is what bounds the Applications that name it:
//     git may not write one.
//
// --sync-allow-delegation (Config.AllowDelegation) lets git apply a kind
// that cannot be pinned, on purpose. A source (a Flux GitRepository,
// OCIRepository, Bucket, HelmRepository, HelmChart) is not refused: it
// only fetches, and applies nothing. What applies it is a Kustomization or
// HelmRelease: git's own are checked here, and one an operator wrote has
// trusted whatever can write its source, as it trusts whatever can write
// any object it reads. Keep the sources such objects read out of git's
// namespaces (--sync-namespaces), or list their kinds in --sync-deny-kinds.

// DelegationKinds are the kinds --sync-allow-delegation takes.
var DelegationKinds = []string{"Kustomization", "HelmRelease", "Application", "ApplicationSet", "AppProject"}

const delegationFlag = "--sync-allow-delegation"

// delegationKind is kind's name in DelegationKinds when group's kind is
// one, else "".
func delegationKind(group, kind string) string {
	switch {
	case kind == "Kustomization" && group == "kustomize.toolkit.fluxcd.io",
		kind == "HelmRelease" && (group == "helm.toolkit.fluxcd.io" || group == "helm.fluxcd.io"),
		(kind == "Application" || kind == "ApplicationSet" || kind == "AppProject") && group == "argoproj.io":
		return kind
	}
	return ""
}

// refuseDelegation is why git may not apply u, an object that makes
// another controller apply things, or "".
func (g *Guard) refuseDelegation(u *unstructured.Unstructured) string {
	gvk := u.GroupVersionKind()
	kind := delegationKind(gvk.Group, gvk.Kind)
	if kind == "" || slices.ContainsFunc(g.cfg.AllowDelegation, func(k string) bool { return strings.EqualFold(k, kind) }) {
		return ""
	}
	what := fmt.Sprintf("the %s %s", kind, nsName(u))
	unpinned := func(why, fix string) string {
		return fmt.Sprintf("%s would make another controller apply what its source holds, %s, past fluxd's limits (its own namespace, --sync-deny-kinds, --sync-namespaces, scopes); %s, or start fluxd with %s=%s to allow it", what, why, fix, delegationFlag, kind)
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	str := func(m map[string]any, path ...string) string {
		s, _, _ := unstructured.NestedString(m, path...)
		return s
	}
	switch kind {
	case "Kustomization":
		if _, ok := spec["kubeConfig"]; ok {
			return unpinned("on another cluster (spec.kubeConfig), where none of fluxd's limits hold", "apply it by hand")
		}
		var missing []string
		for _, f := range []string{"serviceAccountName", "targetNamespace"} {
			if str(spec, f) == "" {
				missing = append(missing, "spec."+f)
			}
		}
		if len(missing) > 0 {
			return unpinned("as kustomize-controller (often cluster-admin) and into any namespace, since it has no "+strings.Join(missing, " and "), "name a spec.serviceAccountName whose RBAC bounds what it may apply, and a spec.targetNamespace git may apply to")
		}
		if sa := g.adminServiceAccount(u); sa != "" {
			return unpinned("as ServiceAccount "+sa+", which may do anything in the cluster, so it pins nothing", "name a ServiceAccount with the rights of its namespace only")
		}
	case "HelmRelease":
		if _, ok := spec["kubeConfig"]; ok {
			return unpinned("on another cluster (spec.kubeConfig), where none of fluxd's limits hold", "apply it by hand")
		}
		if sa := g.adminServiceAccount(u); sa != "" && g.strict() {
			return unpinned("as ServiceAccount "+sa+", which may do anything in the cluster, while fluxd promises namespaces ("+g.strictWhy()+")", "name a ServiceAccount with the rights of its namespace only")
		}
		if str(spec, "serviceAccountName") == "" && g.strict() {
			if gvk.Group == "helm.fluxcd.io" {
				return unpinned("as the Helm operator, which cannot be given a ServiceAccount, while fluxd promises namespaces ("+g.strictWhy()+")", "move it to a Flux v2 HelmRelease (helm.toolkit.fluxcd.io) with a spec.serviceAccountName")
			}
			return unpinned("as helm-controller (often cluster-admin), since it has no spec.serviceAccountName, while fluxd promises namespaces ("+g.strictWhy()+")", "name a spec.serviceAccountName whose RBAC bounds what its chart may install")
		}
	case "Application", "ApplicationSet":
		app, where := spec, "spec."
		if kind == "ApplicationSet" {
			if _, ok := spec["templatePatch"]; ok {
				return unpinned("wherever its spec.templatePatch puts each Application", "drop the templatePatch")
			}
			if path := generatorTemplate(spec["generators"], "spec.generators"); path != "" {
				return unpinned("wherever "+path+" puts its Applications (a generator's own template overrides spec.template)", "drop the generator's template and pin spec.template.spec")
			}
			app, _, _ = unstructured.NestedMap(spec, "template", "spec")
			where = "spec.template.spec."
		}
		ns, project := str(app, "destination", "namespace"), str(app, "project")
		server, cluster := str(app, "destination", "server"), str(app, "destination", "name")
		switch {
		case server != "" && server != "https://kubernetes.default.svc" || cluster != "" && cluster != "in-cluster":
			return unpinned("on another cluster ("+where+"destination), where none of fluxd's limits hold", "apply it by hand")
		case ns == "" || strings.Contains(ns, "{{"):
			return unpinned("into any namespace, since "+where+"destination.namespace is not set to one", "set "+where+"destination.namespace to a namespace git may apply to, and "+where+"project to an AppProject that allows only that")
		case project == "" || project == "default" || strings.Contains(project, "{{"):
			return unpinned("bounded by no AppProject, since "+where+"project is not set to one other than \"default\" (which, as Argo CD installs it, allows every destination and kind)", "set "+where+"project to an AppProject that allows only the namespaces git may apply to")
		}
	case "AppProject":
		return fmt.Sprintf("git may not apply %s: an AppProject bounds what Argo CD applies for every Application that names it, so git could lift the bounds its Applications are held to; apply it by hand, or start fluxd with %s=AppProject", what, delegationFlag)
	}
	return ""
}

// Warn is what an operator should know about u though git may apply it,
// or "": a Flux HelmRelease that names no serviceAccountName is installed
// as helm-controller, which may install its chart's objects anywhere.
func (g *Guard) Warn(u *unstructured.Unstructured) string {
	if g == nil {
		return ""
	}
	gvk := u.GroupVersionKind()
	if delegationKind(gvk.Group, gvk.Kind) != "HelmRelease" {
		return ""
	}
	if sa := g.adminServiceAccount(u); sa != "" {
		return fmt.Sprintf("the HelmRelease %s names ServiceAccount %s, which may do anything in the cluster, so helm-controller may install its chart's objects in any namespace or none, past fluxd's limits; name a ServiceAccount with the rights of its namespace only. fluxd refuses it under --sync-namespaces or a scope", nsName(u), sa)
	}
	if sa, _, _ := unstructured.NestedString(u.Object, "spec", "serviceAccountName"); sa != "" {
		return ""
	}
	return fmt.Sprintf("the HelmRelease %s names no spec.serviceAccountName, so helm-controller installs its chart as itself (often cluster-admin), and the chart may put objects in any namespace or none, past fluxd's limits; name a ServiceAccount that is not an admin (or run helm-controller with --default-service-account). fluxd refuses it under --sync-namespaces or a scope", nsName(u))
}

// adminServiceAccount is u's spec.serviceAccountName, NAMESPACE/NAME,
// when Config.Admin says it may do anything in the cluster, else "".
func (g *Guard) adminServiceAccount(u *unstructured.Unstructured) string {
	sa, _, _ := unstructured.NestedString(u.Object, "spec", "serviceAccountName")
	if sa == "" || g.cfg.Admin == nil {
		return ""
	}
	if admin, err := g.cfg.Admin(u.GetNamespace(), sa); err != nil || !admin {
		return ""
	}
	return u.GetNamespace() + "/" + sa
}

// strict says whether fluxd promises namespaces: --sync-namespaces, or an
// instance with a scope.
func (g *Guard) strict() bool { return g.strictWhy() != "" }

func (g *Guard) strictWhy() string {
	if len(g.cfg.Namespaces) > 0 {
		return "--sync-namespaces " + strings.Join(g.cfg.Namespaces, ",")
	}
	if g.cfg.Scoped != nil && g.cfg.Scoped() {
		return "an instance of the tokens file has a scope"
	}
	return ""
}

// nsName is u's NAMESPACE/NAME, or NAME.
func nsName(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// ValidateDelegation reports the kinds of allow that are not
// DelegationKinds.
func ValidateDelegation(allow []string) error {
	var bad []string
	for _, k := range allow {
		if !slices.ContainsFunc(DelegationKinds, func(d string) bool { return strings.EqualFold(d, k) }) {
			bad = append(bad, k)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s names %s: it takes %s", delegationFlag, strings.Join(bad, ","), strings.Join(DelegationKinds, ","))
	}
	return nil
}

// generatorTemplate finds a template or templatePatch anywhere under an
// ApplicationSet's generators (a generator's own template overrides
// spec.template for its Applications; matrix and merge generators nest
// generators of their own), and returns its path, or "".
func generatorTemplate(v any, path string) string {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "template" || k == "templatePatch" {
				return path + "." + k
			}
			if p := generatorTemplate(t[k], path+"."+k); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range t {
			if p := generatorTemplate(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}
