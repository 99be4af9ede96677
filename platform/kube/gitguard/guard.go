package gitguard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// DefaultDenyKinds are the kinds git may not apply unless --sync-deny-kinds
// says otherwise: cluster-wide RBAC, admission control and API
// aggregation, with which a commit could grant itself (or anyone) more
// than fluxd's namespaces, intercept or rewrite every request to the API
// server, or route a whole API group to a Service of its choosing.
var DefaultDenyKinds = []string{
	"ClusterRole.rbac.authorization.k8s.io",
	"ClusterRoleBinding.rbac.authorization.k8s.io",
	"MutatingWebhookConfiguration.admissionregistration.k8s.io",
	"ValidatingWebhookConfiguration.admissionregistration.k8s.io",
	"ValidatingAdmissionPolicy.admissionregistration.k8s.io",
	"ValidatingAdmissionPolicyBinding.admissionregistration.k8s.io",
	"MutatingAdmissionPolicy.admissionregistration.k8s.io",
	"MutatingAdmissionPolicyBinding.admissionregistration.k8s.io",
	"APIService.apiregistration.k8s.io",
}

// Config is what git may apply beyond the defaults, and who fluxd is.
type Config struct {
	// DenyKinds are kinds git may not apply ("Kind" or "Kind.group").
	DenyKinds []string
	// AllowConversionWebhooks lets git apply a CustomResourceDefinition
	// whose spec.conversion calls a webhook: the API server would send
	// every object of that kind, on every read and write, to a Service
	// the commit names.
	AllowConversionWebhooks bool
	// Self is who fluxd runs as; its zero value knows nothing, and the
	// checks that need it then refuse nothing.
	Self Self
	// AllowOwnNamespace lets git apply objects in fluxd's own namespaces
	// (Self.Namespaces): its Secrets (deploy key, tokens), its RBAC, its
	// Deployment.
	AllowOwnNamespace bool
	// AllowOwnServiceAccount lets git apply a pod (in any workload) or a
	// token Secret that would run as, or mint a token for, fluxd's
	// ServiceAccount.
	AllowOwnServiceAccount bool
	// Namespaces, when set (--sync-namespaces), are the only namespaces
	// git may apply namespaced objects (and Namespace objects) in, by
	// the sync or a release.
	Namespaces []string
	// AllowDelegation are the kinds (DelegationKinds) git may apply even
	// when what their controller applies is not pinned to these limits
	// (delegate.go).
	AllowDelegation []string
	// Scoped reports whether an instance has a scope now; a HelmRelease
	// must then name a serviceAccountName, as under Namespaces. nil:
	// none has.
	Scoped func() bool
	// Admin reports whether ServiceAccount NAMESPACE/NAME may do
	// everything in the cluster (AdminReviews): a Kustomization or
	// HelmRelease that names such a one is not pinned by it. nil, or an
	// error: the ServiceAccount is taken at its word.
	Admin func(namespace, name string) (bool, error)
}

// Self is who fluxd is in the cluster.
type Self struct {
	// Namespaces are fluxd's own: $POD_NAMESPACE and its
	// ServiceAccount's.
	Namespaces []string
	// ServiceAccount is fluxd's ServiceAccount, NAMESPACE/NAME, when it
	// reaches the API server as one.
	ServiceAccount string
}

// String says who fluxd is, for its log.
func (s Self) String() string {
	sa := s.ServiceAccount
	if sa == "" {
		sa = "none (fluxd does not reach the API server as a ServiceAccount)"
	}
	ns := strings.Join(s.Namespaces, ",")
	if ns == "" {
		ns = "unknown (no $POD_NAMESPACE, no ServiceAccount)"
	}
	return "namespaces " + ns + ", service account " + sa
}

// Discover asks the API server who fluxd's credentials are (a
// SelfSubjectReview): a ServiceAccount names fluxd's ServiceAccount and
// its namespace. podNamespace ($POD_NAMESPACE, set by the install from the
// downward API) is fluxd's namespace too. A cluster that cannot answer
// (SelfSubjectReview is GA since Kubernetes 1.28) leaves the
// ServiceAccount unknown; the error says so, for the log.
func Discover(ctx context.Context, rc *rest.Config, podNamespace string) (Self, error) {
	var self Self
	if podNamespace != "" {
		self.Namespaces = append(self.Namespaces, podNamespace)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return self, err
	}
	rev, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return self, fmt.Errorf("asking the API server who fluxd is (SelfSubjectReview): %w", err)
	}
	if ns, name, ok := serviceAccountOf(rev.Status.UserInfo.Username); ok {
		self.ServiceAccount = ns + "/" + name
		if !slices.Contains(self.Namespaces, ns) {
			self.Namespaces = append(self.Namespaces, ns)
		}
	}
	return self, nil
}

// PodNamespace is $POD_NAMESPACE, or the in-cluster ServiceAccount's
// namespace file, or "".
func PodNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}

// serviceAccountOf parses system:serviceaccount:NAMESPACE:NAME.
func serviceAccountOf(user string) (string, string, bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, name, ok := strings.Cut(rest, ":")
	return ns, name, ok && ns != "" && name != ""
}

// Guard says whether git may apply an object.
type Guard struct{ cfg Config }

// New returns a Guard.
func New(cfg Config) *Guard { return &Guard{cfg: cfg} }

// ErrRefused is what Check's error wraps.
var ErrRefused = errors.New("git may not apply this object")

// Check returns nil when git may apply u, else an error (wrapping
// ErrRefused) that says why and which flag would allow it. A nil Guard
// refuses nothing. u's namespace must be set as it will be applied (a
// namespaced object without one in "default").
func (g *Guard) Check(u *unstructured.Unstructured) error {
	if why := g.Refuse(u); why != "" {
		return fmt.Errorf("%w: %s", ErrRefused, why)
	}
	return nil
}

// Namespaces are the only namespaces git may apply to (Config.Namespaces),
// or nil: any.
func (g *Guard) Namespaces() []string {
	if g == nil {
		return nil
	}
	return g.cfg.Namespaces
}

// Refuse is Check's reason, or "".
func (g *Guard) Refuse(u *unstructured.Unstructured) string {
	if g == nil {
		return ""
	}
	gvk := u.GroupVersionKind()
	for _, d := range g.cfg.DenyKinds {
		kind, group, _ := strings.Cut(d, ".")
		if strings.EqualFold(kind, gvk.Kind) && (group == "" || group == gvk.Group) {
			return fmt.Sprintf("git may not apply a %s (--sync-deny-kinds lists %s): fluxd applies it for whoever can push to git, so cluster-wide RBAC, admission control and API aggregation are refused unless the flag allows them; apply it by hand, or start fluxd with a --sync-deny-kinds that leaves it out", gvk.Kind, d)
		}
	}
	if !g.cfg.AllowConversionWebhooks && gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition" {
		if strategy, _, _ := unstructured.NestedString(u.Object, "spec", "conversion", "strategy"); strategy == "Webhook" {
			return "git may not apply a CustomResourceDefinition with a conversion webhook: the API server would send every object of its kind to the Service it names, on every read and write; apply it by hand, or start fluxd with --sync-allow-conversion-webhooks"
		}
	}
	ns := u.GetNamespace()
	if gvk.Group == "" && gvk.Kind == "Namespace" {
		ns = u.GetName()
	}
	if why := g.refuseNamespace(ns, ""); why != "" {
		return why
	}
	// A Flux HelmRelease or Kustomization, an Argo CD Application or
	// ApplicationSet, names the namespace its controller installs into:
	// what it makes lands there, so that namespace is held to the same
	// rules as the object's own, whether or not the kind may delegate
	// (--sync-allow-delegation).
	for _, path := range targetNamespaceFields(gvk.Group, gvk.Kind) {
		if target, _, _ := unstructured.NestedString(u.Object, path...); target != "" && !strings.Contains(target, "{{") {
			if why := g.refuseNamespace(target, fmt.Sprintf("the %s %s's %s: ", gvk.Kind, nsName(u), strings.Join(path, "."))); why != "" {
				return why
			}
		}
	}
	if why := g.refuseDelegation(u); why != "" {
		return why
	}
	if !g.cfg.AllowOwnServiceAccount && g.cfg.Self.ServiceAccount != "" {
		saNS, saName, _ := strings.Cut(g.cfg.Self.ServiceAccount, "/")
		if ns == saNS {
			if where := runsAs(u.Object, saName); where != "" {
				return fmt.Sprintf("%s would run as fluxd's ServiceAccount %s, with fluxd's rights; give it its own ServiceAccount, or start fluxd with --sync-allow-own-service-account", where, g.cfg.Self.ServiceAccount)
			}
			if gvk.Group == "" && gvk.Kind == "Secret" {
				if t, _, _ := unstructured.NestedString(u.Object, "type"); t == "kubernetes.io/service-account-token" && u.GetAnnotations()["kubernetes.io/service-account.name"] == saName {
					return fmt.Sprintf("a token Secret for fluxd's ServiceAccount %s would hand its token to whoever can read the Secret; start fluxd with --sync-allow-own-service-account to allow it", g.cfg.Self.ServiceAccount)
				}
			}
		}
	}
	return ""
}

// refuseNamespace is why git may not apply to namespace ns (--sync-namespaces,
// fluxd's own namespace), prefixed with where ns was named, or "".
func (g *Guard) refuseNamespace(ns, where string) string {
	if len(g.cfg.Namespaces) > 0 && ns != "" && !slices.Contains(g.cfg.Namespaces, ns) {
		return fmt.Sprintf("%snamespace %s is not one git may apply to (--sync-namespaces %s); move the object to one of those namespaces, or start fluxd with a --sync-namespaces that includes %s", where, ns, strings.Join(g.cfg.Namespaces, ","), ns)
	}
	if !g.cfg.AllowOwnNamespace && ns != "" && slices.Contains(g.cfg.Self.Namespaces, ns) {
		return fmt.Sprintf("%sgit may not apply objects in fluxd's own namespace %s: its Secrets, RBAC and Deployment there are fluxd's; apply it by hand, or start fluxd with --sync-allow-own-namespace", where, ns)
	}
	return ""
}

// targetNamespaceFields are the fields of an object that name the
// namespace its controller installs into: a Flux HelmRelease's release
// and its storage (helm.toolkit.fluxcd.io, and Flux v1's helm.fluxcd.io),
// a Flux Kustomization's target (kustomize.toolkit.fluxcd.io), an Argo CD
// Application's destination, and that of an ApplicationSet's template.
func targetNamespaceFields(group, kind string) [][]string {
	switch {
	case kind == "HelmRelease" && (group == "helm.toolkit.fluxcd.io" || group == "helm.fluxcd.io"):
		return [][]string{{"spec", "targetNamespace"}, {"spec", "storageNamespace"}}
	case kind == "Kustomization" && group == "kustomize.toolkit.fluxcd.io":
		return [][]string{{"spec", "targetNamespace"}}
	case kind == "Application" && group == "argoproj.io":
		return [][]string{{"spec", "destination", "namespace"}}
	case kind == "ApplicationSet" && group == "argoproj.io":
		return [][]string{{"spec", "template", "spec", "destination", "namespace"}}
	}
	return nil
}

// runsAs finds a pod spec in obj, at any depth (a Pod's spec, a
// Deployment's, StatefulSet's, DaemonSet's, ReplicaSet's, Job's or
// ReplicationController's template, a CronJob's job template, a
// PodTemplate, or a custom resource's, such as an Argo Rollout's), that
// runs as the ServiceAccount sa of the object's namespace, and says where
// it is: a map with a list of containers is a pod spec, and it runs as
// serviceAccountName (or the deprecated serviceAccount), "default" when
// neither is set.
func runsAs(obj map[string]any, sa string) string {
	var found string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		if found != "" {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			if _, ok := v["containers"].([]any); ok {
				name, _ := v["serviceAccountName"].(string)
				if name == "" {
					name, _ = v["serviceAccount"].(string)
				}
				if name == "" {
					name = "default"
				}
				if name == sa {
					found = "the pod spec at " + strings.TrimPrefix(path, ".")
					if path == "" {
						found = "the pod spec"
					}
					return
				}
			}
			for k, e := range v {
				walk(e, path+"."+k)
			}
		case []any:
			for i, e := range v {
				walk(e, fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(obj, "")
	return found
}
