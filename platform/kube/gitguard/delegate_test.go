package gitguard

import (
	"errors"
	"strings"
	"testing"
)

// Objects that make another controller apply things pass only when what
// that controller applies is pinned to fluxd's limits; each refusal names
// the object and --sync-allow-delegation=KIND, which allows it. Sources
// apply nothing and pass.
func TestGuardRefusesDelegationThatCannotBePinned(t *testing.T) {
	t.Parallel()
	self := Self{Namespaces: []string{"fluxd"}, ServiceAccount: "fluxd/fluxd"}
	ks := func(spec string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: k, namespace: apps}\nspec: {sourceRef: {kind: GitRepository, name: src}, path: ./" + spec + "}"
	}
	hr := func(apiVersion, spec string) string {
		return "apiVersion: " + apiVersion + "\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {chart: {spec: {chart: web}}" + spec + "}"
	}
	app := func(dest, project string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: apps}\nspec:\n  source: {repoURL: https://git.example/x.git, path: .}\n  destination: {" + dest + "}\n" + project
	}
	appSet := func(spec string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: s, namespace: apps}\nspec:\n  generators: [{list: {elements: [{ns: apps}]}}]\n" + spec
	}
	const tmpl = "  template:\n    metadata: {name: x}\n    spec:\n      source: {repoURL: https://git.example/x.git, path: .}\n"
	for _, tc := range []struct {
		name, yaml string
		// kind: "" when allowed by default, else the kind
		// --sync-allow-delegation must name to allow it.
		kind string
		// strict: only refused under --sync-namespaces or a scope.
		strict bool
		// want is in the refusal.
		want string
	}{
		{"Kustomization, Flux's default (nothing pinned)", ks(""), "Kustomization", false, "no spec.serviceAccountName and spec.targetNamespace"},
		{"Kustomization with a targetNamespace only", ks(", targetNamespace: apps"), "Kustomization", false, "no spec.serviceAccountName"},
		{"Kustomization with a serviceAccountName only", ks(", serviceAccountName: apps-deployer"), "Kustomization", false, "no spec.targetNamespace"},
		{"Kustomization pinned", ks(", serviceAccountName: apps-deployer, targetNamespace: apps"), "", false, ""},
		{"Kustomization pinned, to another cluster", ks(", serviceAccountName: d, targetNamespace: apps, kubeConfig: {secretRef: {name: remote}}"), "Kustomization", false, "spec.kubeConfig"},
		{"HelmRelease without a serviceAccountName", hr("helm.toolkit.fluxcd.io/v2", ""), "HelmRelease", true, "no spec.serviceAccountName"},
		{"Flux v1 HelmRelease (no ServiceAccount possible)", hr("helm.fluxcd.io/v1", ""), "HelmRelease", true, "cannot be given a ServiceAccount"},
		{"HelmRelease with a serviceAccountName", hr("helm.toolkit.fluxcd.io/v2", ", serviceAccountName: apps-deployer"), "", false, ""},
		{"HelmRelease to another cluster", hr("helm.toolkit.fluxcd.io/v2", ", serviceAccountName: d, kubeConfig: {secretRef: {name: remote}}"), "HelmRelease", false, "spec.kubeConfig"},
		{"Application without a destination namespace", app("server: https://kubernetes.default.svc", "  project: apps\n"), "Application", false, "destination.namespace is not set"},
		{"Application in project default", app("namespace: apps", "  project: default\n"), "Application", false, `"default"`},
		{"Application without a project", app("namespace: apps", ""), "Application", false, "spec.project"},
		{"Application to another cluster", app("namespace: apps, server: https://other.example:6443", "  project: apps\n"), "Application", false, "another cluster"},
		{"Application to another cluster by name", app("namespace: apps, name: prod", "  project: apps\n"), "Application", false, "another cluster"},
		{"Application pinned", app("namespace: apps, server: https://kubernetes.default.svc", "  project: apps\n"), "", false, ""},
		{"Application pinned, in-cluster by name", app("namespace: apps, name: in-cluster", "  project: apps\n"), "", false, ""},
		{"ApplicationSet without a destination namespace", appSet(tmpl + "      project: apps\n      destination: {server: https://kubernetes.default.svc}\n"), "ApplicationSet", false, "spec.template.spec.destination.namespace"},
		{"ApplicationSet with a templated namespace", appSet(tmpl + "      project: apps\n      destination: {namespace: '{{ns}}'}\n"), "ApplicationSet", false, "spec.template.spec.destination.namespace"},
		{"ApplicationSet in project default", appSet(tmpl + "      project: default\n      destination: {namespace: apps}\n"), "ApplicationSet", false, "spec.template.spec.project"},
		{"ApplicationSet with a templatePatch", appSet(tmpl + "      project: apps\n      destination: {namespace: apps}\n  templatePatch: 'spec: {project: default}'\n"), "ApplicationSet", false, "templatePatch"},
		{"ApplicationSet with a generator's own template", "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: s, namespace: apps}\nspec:\n  generators: [{list: {elements: [{x: '1'}], template: {metadata: {}, spec: {project: default, destination: {namespace: fluxd, server: https://kubernetes.default.svc}}}}}]\n" + tmpl + "      project: apps\n      destination: {namespace: apps}\n", "ApplicationSet", false, "spec.generators[0].list.template"},
		{"ApplicationSet with a template in a matrix's generator", "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: s, namespace: apps}\nspec:\n  generators:\n  - matrix:\n      generators:\n      - list: {elements: [{x: '1'}]}\n      - clusters: {template: {spec: {project: default}}}\n" + tmpl + "      project: apps\n      destination: {namespace: apps}\n", "ApplicationSet", false, "spec.generators[0].matrix.generators[1].clusters.template"},
		{"ApplicationSet pinned", appSet(tmpl + "      project: apps\n      destination: {namespace: apps}\n"), "", false, ""},
		{"AppProject", "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {name: apps, namespace: apps}\nspec: {destinations: [{namespace: '*', server: '*'}]}", "AppProject", false, "AppProject bounds"},
		{"GitRepository (a source applies nothing)", "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: src, namespace: apps}\nspec: {url: https://git.example/x.git, ref: {branch: main}}", "", false, ""},
		{"OCIRepository", "apiVersion: source.toolkit.fluxcd.io/v1beta2\nkind: OCIRepository\nmetadata: {name: src, namespace: apps}\nspec: {url: oci://reg.example/x}", "", false, ""},
		{"Bucket", "apiVersion: source.toolkit.fluxcd.io/v1\nkind: Bucket\nmetadata: {name: src, namespace: apps}\nspec: {bucketName: x, endpoint: s3.example}", "", false, ""},
		{"another group's Application", "apiVersion: example.com/v1\nkind: Application\nmetadata: {name: a, namespace: apps}", "", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, cfg := range []struct {
				name   string
				cfg    Config
				strict bool
			}{
				{"by default", Config{DenyKinds: DefaultDenyKinds, Self: self}, false},
				{"under --sync-namespaces", Config{DenyKinds: DefaultDenyKinds, Self: self, Namespaces: []string{"apps"}}, true},
				{"with a scoped instance", Config{DenyKinds: DefaultDenyKinds, Self: self, Scoped: func() bool { return true }}, true},
			} {
				err := New(cfg.cfg).Check(obj(t, tc.yaml))
				refused := tc.kind != "" && (!tc.strict || cfg.strict)
				if !refused {
					if err != nil {
						t.Errorf("%s: refused: %v", cfg.name, err)
					}
					continue
				}
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "--sync-allow-delegation="+tc.kind) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), " apps/") {
					t.Errorf("%s: %v; want a refusal naming the object, %q and --sync-allow-delegation=%s", cfg.name, err, tc.want, tc.kind)
				}
				cfg.cfg.AllowDelegation = []string{strings.ToLower(tc.kind)}
				if err := New(cfg.cfg).Check(obj(t, tc.yaml)); err != nil {
					t.Errorf("%s, with --sync-allow-delegation=%s: still refused: %v", cfg.name, tc.kind, err)
				}
			}
		})
	}
}

// A pinned target namespace is held to the same limits as the object's
// own, whether or not the kind is allowed to delegate: fluxd's own
// namespace, --sync-namespaces.
func TestGuardHoldsPinnedTargetsToTheNamespaceLimits(t *testing.T) {
	t.Parallel()
	self := Self{Namespaces: []string{"fluxd"}, ServiceAccount: "fluxd/fluxd"}
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"Kustomization into fluxd's namespace", "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: k, namespace: apps}\nspec: {serviceAccountName: d, targetNamespace: fluxd}", "--sync-allow-own-namespace"},
		{"Kustomization outside --sync-namespaces", "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: k, namespace: apps}\nspec: {serviceAccountName: d, targetNamespace: kube-system}", "--sync-namespaces apps"},
		{"HelmRelease storage outside --sync-namespaces", "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: h, namespace: apps}\nspec: {serviceAccountName: d, storageNamespace: kube-system}", "--sync-namespaces apps"},
		{"Application into fluxd's namespace", "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: apps}\nspec: {project: apps, destination: {namespace: fluxd}}", "--sync-allow-own-namespace"},
		{"Application outside --sync-namespaces", "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: a, namespace: apps}\nspec: {project: apps, destination: {namespace: kube-system}}", "--sync-namespaces apps"},
		{"ApplicationSet into fluxd's namespace", "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: s, namespace: apps}\nspec: {template: {spec: {project: apps, destination: {namespace: fluxd}}}}", "--sync-allow-own-namespace"},
	} {
		ns := []string{"apps"}
		if strings.Contains(tc.want, "own-namespace") {
			ns = nil
		}
		for _, allow := range [][]string{nil, DelegationKinds} {
			err := New(Config{Self: self, Namespaces: ns, AllowDelegation: allow}).Check(obj(t, tc.yaml))
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s (--sync-allow-delegation=%s): %v; want a refusal naming %s", tc.name, strings.Join(allow, ","), err, tc.want)
			}
		}
	}
}

// Warn: a HelmRelease without a serviceAccountName is applied with a
// warning where it is not refused; one with, and other kinds, without.
func TestGuardWarnsOfHelmReleasesWithoutAServiceAccount(t *testing.T) {
	t.Parallel()
	g := New(Config{})
	if w := g.Warn(obj(t, "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {chart: {spec: {chart: web}}}")); !strings.Contains(w, "apps/web") || !strings.Contains(w, "serviceAccountName") {
		t.Errorf("no serviceAccountName: warning %q", w)
	}
	if w := g.Warn(obj(t, "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {serviceAccountName: web}")); w != "" {
		t.Errorf("with a serviceAccountName: warning %q", w)
	}
	if w := g.Warn(obj(t, deploymentYAML)); w != "" {
		t.Errorf("a Deployment: warning %q", w)
	}
}

func TestValidateDelegation(t *testing.T) {
	t.Parallel()
	if err := ValidateDelegation([]string{"Kustomization", "applicationset"}); err != nil {
		t.Error(err)
	}
	if err := ValidateDelegation([]string{"Kustomization", "GitRepository"}); err == nil || !strings.Contains(err.Error(), "GitRepository") {
		t.Errorf("GitRepository: %v", err)
	}
}

// A ServiceAccount that may do anything in the cluster (Config.Admin)
// pins nothing: a Kustomization naming one is refused, a HelmRelease
// naming one is warned of, and refused under --sync-namespaces; one whose
// rights cannot be told is taken at its word.
func TestGuardAdminServiceAccountsPinNothing(t *testing.T) {
	t.Parallel()
	admin := func(ns, name string) (bool, error) {
		switch name {
		case "admin":
			return true, nil
		case "unknown":
			return false, errors.New("forbidden")
		}
		return false, nil
	}
	ks := func(sa string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: k, namespace: apps}\nspec: {serviceAccountName: " + sa + ", targetNamespace: apps}"
	}
	hr := func(sa string) string {
		return "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: h, namespace: apps}\nspec: {serviceAccountName: " + sa + "}"
	}
	g := New(Config{Admin: admin})
	strict := New(Config{Admin: admin, Namespaces: []string{"apps"}})
	if err := g.Check(obj(t, ks("admin"))); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "ServiceAccount apps/admin, which may do anything") {
		t.Errorf("a Kustomization as an admin: %v", err)
	}
	for _, sa := range []string{"deployer", "unknown"} {
		if err := strict.Check(obj(t, ks(sa))); err != nil {
			t.Errorf("a Kustomization as %s: %v", sa, err)
		}
		if err := strict.Check(obj(t, hr(sa))); err != nil {
			t.Errorf("a HelmRelease as %s: %v", sa, err)
		}
		if w := g.Warn(obj(t, hr(sa))); w != "" {
			t.Errorf("a HelmRelease as %s: warning %q", sa, w)
		}
	}
	if err := g.Check(obj(t, hr("admin"))); err != nil {
		t.Errorf("a HelmRelease as an admin, without --sync-namespaces: %v", err)
	}
	if w := g.Warn(obj(t, hr("admin"))); !strings.Contains(w, "apps/admin, which may do anything") {
		t.Errorf("a HelmRelease as an admin: warning %q", w)
	}
	if err := strict.Check(obj(t, hr("admin"))); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "--sync-allow-delegation=HelmRelease") {
		t.Errorf("a HelmRelease as an admin, under --sync-namespaces: %v", err)
	}
}
