package e2e

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fluxd/fluxd/platform/kube/gitguard"
)

// The guard tests: git under guardDir, the objects in guardNS, and a
// fluxd that runs as ServiceAccount guardSA in namespace guardSelfNS, as
// it does in a cluster.
const (
	guardDir    = "guardtest"
	guardNS     = "guardtest"
	guardSelfNS = "guard-fluxd"
	guardSA     = "fluxd"
)

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

func guardManifests() map[string]string {
	deploy := func(ns, name, sa string) string {
		return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      serviceAccountName: %[3]s
      containers: [{name: app, image: %[4]s/helloworld:1.0.0}]
`, name, ns, sa, stack.Registry)
	}
	return map[string]string{
		guardDir + "/ok.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + guardNS + "}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: ok, namespace: " + guardNS + "}\ndata: {a: b}\n",
		// Would route the API group evil.e2e.fluxd.io to a Service of
		// the commit's choosing.
		guardDir + "/apiservice.yaml": `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {name: v1.evil.e2e.fluxd.io}
spec:
  group: evil.e2e.fluxd.io
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  insecureSkipTLSVerify: true
  service: {name: evil, namespace: ` + guardNS + `}
`,
		guardDir + "/conversion.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.e2e.fluxd.io}
spec:
  group: e2e.fluxd.io
  scope: Namespaced
  names: {plural: gizmos, singular: gizmo, kind: Gizmo}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig: {service: {name: evil, namespace: ` + guardNS + `, path: /convert}}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`,
		guardDir + "/planted.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: planted, namespace: " + guardSelfNS + "}\ndata: {a: b}\n",
		guardDir + "/as-fluxd.yaml":  deploy(guardSelfNS, "as-fluxd", guardSA),
		guardDir + "/own-sa.yaml":    deploy(guardSelfNS, "own-sa", "default"),
		guardDir + "/elsewhere.yaml": deploy(guardNS, "elsewhere", guardSA), // another namespace's "fluxd": not fluxd's
	}
}

// guardKubeconfig makes ServiceAccount guardSA in guardSelfNS, lets it do
// anything (as a sync's fluxd often may), and writes a kubeconfig that
// reaches the stack's API server as it.
func guardKubeconfig(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	kc := kubeClient(t)
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: guardSelfNS}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = kc.CoreV1().ServiceAccounts(guardSelfNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: guardSA}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = kc.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "guard-fluxd"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: guardSA, Namespace: guardSelfNS}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	hour := int64(3600)
	tr, err := kc.CoreV1().ServiceAccounts(guardSelfNS).CreateToken(ctx, guardSA, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(stack.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{"sa": {Token: tr.Status.Token}}
	for _, c := range cfg.Contexts {
		c.AuthInfo = "sa"
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func cleanUpGuard(t *testing.T) {
	ctx := context.Background()
	kc := kubeClient(t)
	dyn := dynClient(t)
	_ = dyn.Resource(apiServices).Delete(ctx, "v1.evil.e2e.fluxd.io", metav1.DeleteOptions{})
	_ = dyn.Resource(crds).Delete(ctx, "gizmos.e2e.fluxd.io", metav1.DeleteOptions{})
	_ = kc.CoreV1().Namespaces().Delete(ctx, guardNS, metav1.DeleteOptions{})
	_ = kc.CoreV1().Namespaces().Delete(ctx, guardSelfNS, metav1.DeleteOptions{})
	_ = kc.RbacV1().ClusterRoleBindings().Delete(ctx, "guard-fluxd", metav1.DeleteOptions{})
	for _, n := range []string{"fluxd-sync-guard-old", "fluxd-sync-guard", "fluxd-sync-guard-ns"} {
		_ = kc.CoreV1().ConfigMaps("default").Delete(ctx, n, metav1.DeleteOptions{})
	}
}

// stackLog is the log of the stack's process name.
func stackLog(t *testing.T, name string) string {
	t.Helper()
	b, _ := os.ReadFile(stack.Log(name))
	return string(b)
}

// TestSyncRefusesWhatCouldTakeOverTheCluster: with the sync on, whoever
// pushes to git gets fluxd's RBAC. Reproduced first: with the deny list
// fluxd had before (no APIService in it), 'fluxctl sync' creates an
// APIService from git. With today's defaults, a fluxd running as a
// ServiceAccount refuses the APIService, a CRD with a conversion
// webhook, objects in its own namespace and a Deployment running as its
// ServiceAccount, naming each and the flag that allows it, and applies
// the rest; with --sync-allow-own-namespace, the Deployment that runs as
// fluxd's ServiceAccount is still refused and one that runs as another
// is applied.
func TestSyncRefusesWhatCouldTakeOverTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	t.Cleanup(func() { cleanUpGuard(t) })
	ctx := testContext(t)
	kc := kubeClient(t)
	dyn := dynClient(t)
	kubeconfig := guardKubeconfig(t)
	pushManifest(t, "Add the guard test's manifests", guardManifests())

	sync := func(name string, extra ...string) string {
		t.Helper()
		args := append([]string{"--kubeconfig=" + kubeconfig, "--sync-interval=1h", "--git-poll-interval=1h", "--sync-inventory=default/fluxd-sync-" + name}, extra...)
		f := startFaultFluxd(t, name, guardDir, nil, args...)
		defer stopFluxd(t, f)
		out, stderr, _ := fluxctl(t, []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"]}, "sync")
		return out + stderr
	}

	t.Run("reproduced with the old defaults", func(t *testing.T) {
		old := "--sync-deny-kinds=" + strings.Join(gitguard.DefaultDenyKinds[:6], ",")
		out := sync("guard-old", old, "--sync-allow-conversion-webhooks", "--sync-allow-own-namespace", "--sync-allow-own-service-account")
		if _, err := dyn.Resource(apiServices).Get(ctx, "v1.evil.e2e.fluxd.io", metav1.GetOptions{}); err != nil {
			t.Fatalf("the old defaults did not create the APIService (the reproduction failed): %v\n%s", err, out)
		}
		// Gone at once: an APIService whose Service does not answer makes
		// discovery fail for everyone on the stack.
		if err := dyn.Resource(apiServices).Delete(ctx, "v1.evil.e2e.fluxd.io", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		_ = dyn.Resource(crds).Delete(ctx, "gizmos.e2e.fluxd.io", metav1.DeleteOptions{})
		_ = kc.CoreV1().ConfigMaps(guardSelfNS).Delete(ctx, "planted", metav1.DeleteOptions{})
		_ = kc.AppsV1().Deployments(guardSelfNS).Delete(ctx, "as-fluxd", metav1.DeleteOptions{})
		_ = kc.AppsV1().Deployments(guardSelfNS).Delete(ctx, "own-sa", metav1.DeleteOptions{})
	})

	t.Run("refused by default", func(t *testing.T) {
		out := sync("guard")
		for object, flag := range map[string]string{
			"APIService/v1.evil.e2e.fluxd.io":              "--sync-deny-kinds",
			"CustomResourceDefinition/gizmos.e2e.fluxd.io": "--sync-allow-conversion-webhooks",
			"ConfigMap/" + guardSelfNS + "/planted":        "--sync-allow-own-namespace",
			"Deployment/" + guardSelfNS + "/as-fluxd":      "--sync-allow-own-namespace",
		} {
			if !hasLine(out, object+" failed", flag) {
				t.Errorf("%s: not reported failed naming %s:\n%s", object, flag, out)
			}
		}
		if _, err := dyn.Resource(apiServices).Get(ctx, "v1.evil.e2e.fluxd.io", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the APIService exists: %v\n%s", err, out)
		}
		if _, err := dyn.Resource(crds).Get(ctx, "gizmos.e2e.fluxd.io", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the CRD with a conversion webhook exists: %v", err)
		}
		if _, err := kc.CoreV1().ConfigMaps(guardSelfNS).Get(ctx, "planted", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the ConfigMap in fluxd's namespace exists: %v", err)
		}
		if _, err := kc.AppsV1().Deployments(guardSelfNS).Get(ctx, "as-fluxd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Deployment running as fluxd exists: %v", err)
		}
		// The rest of the commit is applied.
		if _, err := kc.CoreV1().ConfigMaps(guardNS).Get(ctx, "ok", metav1.GetOptions{}); err != nil {
			t.Errorf("the harmless ConfigMap was not applied: %v\n%s", err, out)
		}
		if _, err := kc.AppsV1().Deployments(guardNS).Get(ctx, "elsewhere", metav1.GetOptions{}); err != nil {
			t.Errorf("a Deployment of another namespace's ServiceAccount named %s was not applied: %v", guardSA, err)
		}
		if !strings.Contains(stackLog(t, "guard"), "service account "+guardSelfNS+"/"+guardSA) {
			t.Errorf("fluxd's log does not say which ServiceAccount it runs as")
		}
	})

	t.Run("own namespace allowed, own ServiceAccount still refused", func(t *testing.T) {
		out := sync("guard-ns", "--sync-allow-own-namespace")
		if !hasLine(out, "Deployment/"+guardSelfNS+"/as-fluxd failed", "--sync-allow-own-service-account") {
			t.Errorf("the Deployment running as fluxd's ServiceAccount was not refused naming the flag:\n%s", out)
		}
		if _, err := kc.AppsV1().Deployments(guardSelfNS).Get(ctx, "as-fluxd", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the Deployment running as fluxd exists: %v", err)
		}
		if _, err := kc.AppsV1().Deployments(guardSelfNS).Get(ctx, "own-sa", metav1.GetOptions{}); err != nil {
			t.Errorf("with --sync-allow-own-namespace, a Deployment of another ServiceAccount in fluxd's namespace was not applied: %v\n%s", err, out)
		}
	})
}

//go:embed testdata/delegation-crds.yaml
var delegationCRDs string

// The delegation test: git under delegDir, its objects in delegNS.
const (
	delegDir = "delegtest"
	delegNS  = "delegtest"
)

var (
	kustomizations = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	gitRepos       = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	argoApps       = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
)

func delegationManifests() map[string]string {
	return map[string]string{
		delegDir + "/ns.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + delegNS + "}\n",
		// A source applies nothing: it passes.
		delegDir + "/source.yaml": "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: anything, namespace: " + delegNS + "}\nspec: {interval: 1m, url: https://git.example/anything.git, ref: {branch: main}}\n",
		// Flux's defaults: kustomize-controller would apply whatever the
		// source holds, as itself, anywhere.
		delegDir + "/ks-everything.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: everything, namespace: " + delegNS + "}\nspec: {interval: 1m, path: ./, prune: true, sourceRef: {kind: GitRepository, name: anything}}\n",
		delegDir + "/ks-pinned.yaml":     "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: pinned, namespace: " + delegNS + "}\nspec: {interval: 1m, path: ./, sourceRef: {kind: GitRepository, name: anything}, serviceAccountName: deployer, targetNamespace: " + delegNS + "}\n",
		// Argo CD's project default allows every destination and kind.
		delegDir + "/app-everything.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: everything, namespace: " + delegNS + "}\nspec:\n  project: default\n  source: {repoURL: https://git.example/anything.git, path: ., targetRevision: HEAD}\n  destination: {server: https://kubernetes.default.svc}\n",
		delegDir + "/app-pinned.yaml":     "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: pinned, namespace: " + delegNS + "}\nspec:\n  project: team\n  source: {repoURL: https://git.example/anything.git, path: ., targetRevision: HEAD}\n  destination: {server: https://kubernetes.default.svc, namespace: " + delegNS + "}\n",
	}
}

// TestSyncRefusesDelegationAroundTheGuard: a Flux Kustomization and an
// Argo CD Application committed to git, that would make their (often
// cluster-admin) controllers apply whatever their source holds, anywhere,
// are refused by a syncing fluxd, naming each object and
// --sync-allow-delegation; pinned ones (a ServiceAccount and a target
// namespace; a destination namespace and a project) and the source are
// applied. Reproduced first: with --sync-allow-delegation naming both
// kinds, as every fluxd behaved before, both are applied.
func TestSyncRefusesDelegationAroundTheGuard(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the local stack")
	}
	ctx := testContext(t)
	kc := kubeClient(t)
	dyn := dynClient(t)
	kubectlApply(t, delegationCRDs)
	if err := poll(ctx, 60*time.Second, func() error {
		for _, gvr := range []schema.GroupVersionResource{kustomizations, gitRepos, argoApps} {
			if _, err := dyn.Resource(gvr).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("the CRDs are not served: %v", err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = kc.CoreV1().Namespaces().Delete(ctx, delegNS, metav1.DeleteOptions{})
		for _, n := range []string{"fluxd-sync-deleg-old", "fluxd-sync-deleg"} {
			_ = kc.CoreV1().ConfigMaps("default").Delete(ctx, n, metav1.DeleteOptions{})
		}
	})
	pushManifest(t, "Add the delegation test's manifests", delegationManifests())

	sync := func(name string, extra ...string) string {
		t.Helper()
		args := append([]string{"--sync-interval=1h", "--git-poll-interval=1h", "--sync-inventory=default/fluxd-sync-" + name}, extra...)
		f := startFaultFluxd(t, name, delegDir, nil, args...)
		defer stopFluxd(t, f)
		out, stderr, _ := fluxctl(t, []string{"FLUX_URL=grpc://" + f.Addr, "FLUX_TOKEN=" + f.Tokens["deployer"]}, "sync")
		return out + stderr
	}
	exists := func(gvr schema.GroupVersionResource, name string) bool {
		_, err := dyn.Resource(gvr).Namespace(delegNS).Get(ctx, name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	unpinned := map[string]schema.GroupVersionResource{"Kustomization": kustomizations, "Application": argoApps}

	t.Run("reproduced as before, with the kinds allowed", func(t *testing.T) {
		out := sync("deleg-old", "--sync-allow-delegation=Kustomization,Application")
		for kind, gvr := range unpinned {
			if !exists(gvr, "everything") {
				t.Fatalf("the %s that delegates everything was not applied (the reproduction failed):\n%s", kind, out)
			}
			if err := dyn.Resource(gvr).Namespace(delegNS).Delete(ctx, "everything", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("refused by default", func(t *testing.T) {
		out := sync("deleg")
		for kind, gvr := range unpinned {
			if !hasLine(out, kind+"/"+delegNS+"/everything failed", delegDir+"/", "--sync-allow-delegation="+kind) {
				t.Errorf("the %s: not reported failed with its file and --sync-allow-delegation=%s:\n%s", kind, kind, out)
			}
			if exists(gvr, "everything") {
				t.Errorf("the %s that delegates everything was applied", kind)
			}
			if !exists(gvr, "pinned") {
				t.Errorf("the pinned %s was not applied:\n%s", kind, out)
			}
		}
		if !exists(gitRepos, "anything") {
			t.Errorf("the GitRepository (a source, which applies nothing) was not applied:\n%s", out)
		}
	})
}
