package gitguard

import (
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const podSpec = `
      containers: [{name: app, image: reg/app:1}]`

// What git may apply, by default and with each flag: every dangerous
// object is refused by default, with the flag that allows it named, and
// allowed by that flag; ordinary objects pass.
func TestGuardRefusesWhatCouldTakeOverTheCluster(t *testing.T) {
	t.Parallel()
	self := Self{Namespaces: []string{"fluxd"}, ServiceAccount: "fluxd/fluxd"}
	deployment := func(ns, sa string) string {
		s := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: " + ns + "}\nspec:\n  template:\n    spec:" + podSpec
		if sa != "" {
			s += "\n      serviceAccountName: " + sa
		}
		return s
	}
	for _, tc := range []struct {
		name, yaml string
		flag       string // "" : allowed by default
		allow      func(*Config)
	}{
		{"APIService", "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1.evil.example}\nspec: {group: evil.example, version: v1, service: {name: x, namespace: y}}", "--sync-deny-kinds", func(c *Config) { c.DenyKinds = nil }},
		{"MutatingAdmissionPolicy", "apiVersion: admissionregistration.k8s.io/v1beta1\nkind: MutatingAdmissionPolicy\nmetadata: {name: p}", "--sync-deny-kinds", func(c *Config) { c.DenyKinds = nil }},
		{"MutatingAdmissionPolicyBinding", "apiVersion: admissionregistration.k8s.io/v1beta1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {name: p}", "--sync-deny-kinds", func(c *Config) { c.DenyKinds = nil }},
		{"ClusterRoleBinding", "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: p}", "--sync-deny-kinds", func(c *Config) { c.DenyKinds = nil }},
		{"CRD with a conversion webhook", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: ws.x.io}\nspec:\n  conversion:\n    strategy: Webhook\n    webhook: {clientConfig: {service: {name: evil, namespace: x}}}", "--sync-allow-conversion-webhooks", func(c *Config) { c.AllowConversionWebhooks = true }},
		{"CRD without conversion", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: ws.x.io}\nspec: {group: x.io}", "", nil},
		{"CRD with conversion None", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: ws.x.io}\nspec: {conversion: {strategy: None}}", "", nil},
		{"ConfigMap in fluxd's namespace", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: fluxd}", "--sync-allow-own-namespace", func(c *Config) { c.AllowOwnNamespace = true }},
		{"fluxd's Namespace itself", "apiVersion: v1\nkind: Namespace\nmetadata: {name: fluxd}", "--sync-allow-own-namespace", func(c *Config) { c.AllowOwnNamespace = true }},
		{"ConfigMap elsewhere", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: apps}", "", nil},
		{"Deployment as fluxd's SA", deployment("fluxd", "fluxd"), "--sync-allow-own-service-account", func(c *Config) { c.AllowOwnServiceAccount = true }},
		{"Deployment as another SA in fluxd's namespace", deployment("fluxd", "web"), "--sync-allow-own-namespace", func(c *Config) { c.AllowOwnNamespace = true }},
		{"Deployment named like fluxd's SA elsewhere", deployment("apps", "fluxd"), "", nil},
		{"Pod as fluxd's SA (deprecated field)", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: fluxd}\nspec:\n  serviceAccount: fluxd" + strings.ReplaceAll(podSpec, "\n      ", "\n  "), "--sync-allow-own-service-account", func(c *Config) { c.AllowOwnServiceAccount = true }},
		{"CronJob as fluxd's SA", "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: c, namespace: fluxd}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          serviceAccountName: fluxd\n          containers: [{name: a, image: b}]", "--sync-allow-own-service-account", func(c *Config) { c.AllowOwnServiceAccount = true }},
		{"a custom resource's pod template as fluxd's SA", "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\nmetadata: {name: r, namespace: fluxd}\nspec:\n  template:\n    spec:\n      serviceAccountName: fluxd\n      containers: [{name: a, image: b}]", "--sync-allow-own-service-account", func(c *Config) { c.AllowOwnServiceAccount = true }},
		{"token Secret for fluxd's SA", "apiVersion: v1\nkind: Secret\nmetadata: {name: t, namespace: fluxd, annotations: {kubernetes.io/service-account.name: fluxd}}\ntype: kubernetes.io/service-account-token", "--sync-allow-own-service-account", func(c *Config) { c.AllowOwnServiceAccount = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := Config{DenyKinds: DefaultDenyKinds, Self: self}
			// Objects in fluxd's namespace are refused as such first:
			// the ServiceAccount's cases are seen with it allowed.
			cfg.AllowOwnNamespace = tc.flag == "--sync-allow-own-service-account"
			err := New(cfg).Check(obj(t, tc.yaml))
			if tc.flag == "" {
				if err != nil {
					t.Fatalf("refused by default: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.flag) {
				t.Fatalf("by default: %v; want a refusal naming %s", err, tc.flag)
			}
			tc.allow(&cfg)
			if err := New(cfg).Check(obj(t, tc.yaml)); err != nil {
				t.Errorf("with %s: still refused: %v", tc.flag, err)
			}
		})
	}
}

// A pod with no serviceAccountName runs as "default": when fluxd runs as
// its namespace's default ServiceAccount, such a pod is refused too.
func TestGuardDefaultServiceAccount(t *testing.T) {
	t.Parallel()
	g := New(Config{Self: Self{Namespaces: []string{"ops"}, ServiceAccount: "ops/default"}, AllowOwnNamespace: true})
	err := g.Check(obj(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ops}\nspec:\n  template:\n    spec:"+podSpec))
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "spec.template.spec") {
		t.Errorf("a pod of the default ServiceAccount, fluxd's: %v", err)
	}
}

// Without knowing who fluxd is (no $POD_NAMESPACE, not a ServiceAccount),
// only the kind checks apply; a nil Guard refuses nothing.
func TestGuardUnknownSelf(t *testing.T) {
	t.Parallel()
	g := New(Config{DenyKinds: DefaultDenyKinds})
	if err := g.Check(obj(t, deploymentYAML)); err != nil {
		t.Errorf("unknown self: %v", err)
	}
	var none *Guard
	if err := none.Check(obj(t, "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: x}")); err != nil {
		t.Errorf("nil guard: %v", err)
	}
}

const deploymentYAML = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}\nspec:\n  template:\n    spec:" + podSpec

func TestServiceAccountOf(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"system:serviceaccount:fluxd:fluxd": "fluxd/fluxd",
		"system:serviceaccount:a:b:c":       "a/b:c",
		"kubernetes-admin":                  "",
		"system:serviceaccount:x":           "",
	} {
		ns, name, ok := serviceAccountOf(in)
		got := ""
		if ok {
			got = ns + "/" + name
		}
		if got != want {
			t.Errorf("serviceAccountOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// --sync-namespaces is the guard's: git may apply only in the listed
// namespaces (a Namespace object by its name), cluster-scoped objects
// pass, and without the flag every namespace is allowed.
func TestGuardRefusesNamespacesOutsideSyncNamespaces(t *testing.T) {
	t.Parallel()
	g := New(Config{Namespaces: []string{"apps", "web"}})
	for _, tc := range []struct {
		yaml    string
		refused bool
	}{
		{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: evil, namespace: kube-system}\nspec:\n  template:\n    spec:" + podSpec, true},
		{"apiVersion: v1\nkind: Namespace\nmetadata: {name: kube-system}", true},
		{"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: apps}\nspec:\n  template:\n    spec:" + podSpec, false},
		{"apiVersion: v1\nkind: Namespace\nmetadata: {name: web}", false},
		{"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: ws.x.io}\nspec: {group: x.io}", false},
	} {
		err := g.Check(obj(t, tc.yaml))
		if tc.refused && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "--sync-namespaces apps,web")) {
			t.Errorf("%s: %v; want a refusal naming --sync-namespaces apps,web", tc.yaml, err)
		}
		if !tc.refused && err != nil {
			t.Errorf("%s: refused: %v", tc.yaml, err)
		}
		if err := New(Config{}).Check(obj(t, tc.yaml)); err != nil {
			t.Errorf("%s without --sync-namespaces: refused: %v", tc.yaml, err)
		}
	}
}

// A Flux HelmRelease (v2 or v1) or Kustomization in an allowed namespace
// that installs into another (spec.targetNamespace, a HelmRelease's
// spec.storageNamespace) is held to --sync-namespaces and to fluxd's own
// namespace as that namespace's objects are: its controller would put
// them there.
func TestGuardRefusesFluxObjectsTargetingOtherNamespaces(t *testing.T) {
	t.Parallel()
	self := Self{Namespaces: []string{"fluxd"}, ServiceAccount: "fluxd/fluxd"}
	hr := func(apiVersion, spec string) string {
		return "apiVersion: " + apiVersion + "\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {" + spec + "}"
	}
	for _, tc := range []struct {
		name, yaml string
		refusal    string // "": allowed
	}{
		{"HelmRelease v2 into kube-system", hr("helm.toolkit.fluxcd.io/v2", "targetNamespace: kube-system"), "--sync-namespaces apps,web"},
		{"HelmRelease v2 storage in kube-system", hr("helm.toolkit.fluxcd.io/v2", "storageNamespace: kube-system"), "--sync-namespaces apps,web"},
		{"HelmRelease v1 into kube-system", hr("helm.fluxcd.io/v1", "targetNamespace: kube-system"), "--sync-namespaces apps,web"},
		{"Kustomization into kube-system", "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: k, namespace: apps}\nspec: {targetNamespace: kube-system}", "--sync-namespaces apps,web"},
		{"HelmRelease v2 into web", hr("helm.toolkit.fluxcd.io/v2", "targetNamespace: web, serviceAccountName: web"), ""},
		{"HelmRelease v2 in its own namespace", hr("helm.toolkit.fluxcd.io/v2", "chart: {spec: {chart: web}}, serviceAccountName: web"), ""},
		{"another group's HelmRelease", hr("example.com/v1", "targetNamespace: kube-system"), ""},
	} {
		err := New(Config{Namespaces: []string{"apps", "web"}, Self: self}).Check(obj(t, tc.yaml))
		if tc.refusal == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.refusal) {
			t.Errorf("%s: %v; want a refusal naming %s", tc.name, err, tc.refusal)
		}
	}
	// fluxd's own namespace, without --sync-namespaces.
	into := hr("helm.toolkit.fluxcd.io/v2", "targetNamespace: fluxd")
	if err := New(Config{Self: self}).Check(obj(t, into)); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "--sync-allow-own-namespace") {
		t.Errorf("a HelmRelease installing into fluxd's namespace: %v; want a refusal naming --sync-allow-own-namespace", err)
	}
	if err := New(Config{Self: self, AllowOwnNamespace: true}).Check(obj(t, into)); err != nil {
		t.Errorf("with --sync-allow-own-namespace: %v", err)
	}
}
