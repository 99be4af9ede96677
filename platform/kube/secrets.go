package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type nsName struct{ namespace, name string }

func (n nsName) String() string { return n.namespace + "/" + n.name }

// PullSecret is an image pull secret some watched workloads use, with the
// images of those workloads: the registry credentials in it are for those
// images, not for every image in the cluster.
type PullSecret struct {
	// Name is "namespace/name".
	Name string
	// DockerConfig is the secret's credentials in config.json format.
	DockerConfig []byte
	// Images are the images (containers and init containers) of the
	// workloads that use the secret, through their own imagePullSecrets
	// or their service account's.
	Images []string
}

// PullSecrets returns the image pull secrets the watched workloads use
// (their own imagePullSecrets and those of their service accounts), each
// with the images of the workloads that use it, sorted by name. Secrets
// are read from the API on each call, never cached in informers, so fluxd
// holds no copy of every secret in the cluster; callers cache the result
// briefly. A secret that is missing, or that fluxd is forbidden to read,
// is left out.
func (c *Cluster) PullSecrets(ctx context.Context) ([]PullSecret, error) {
	images := map[nsName]map[string]bool{} // secret → images
	use := func(secret nsName, spec corev1.PodSpec) {
		if images[secret] == nil {
			images[secret] = map[string]bool{}
		}
		for _, ct := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			images[secret][ct.Image] = true
		}
	}
	accounts := map[nsName][]corev1.PodSpec{} // service account → pod specs
	for _, l := range c.deploys {
		specs, err := l.podSpecs()
		if err != nil {
			return nil, err
		}
		for _, ps := range specs {
			for _, ref := range ps.spec.ImagePullSecrets {
				use(nsName{ps.namespace, ref.Name}, ps.spec)
			}
			sa := ps.spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			a := nsName{ps.namespace, sa}
			accounts[a] = append(accounts[a], ps.spec)
		}
	}
	for a, specs := range accounts {
		sa, err := c.client.CoreV1().ServiceAccounts(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading service account %s: %w", a, err)
		}
		for _, ref := range sa.ImagePullSecrets {
			for _, spec := range specs {
				use(nsName{a.namespace, ref.Name}, spec)
			}
		}
	}
	keys := make([]nsName, 0, len(images))
	for k := range images {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	var out []PullSecret
	for _, k := range keys {
		s, err := c.client.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // a dangling reference: the kubelet ignores it too
		}
		if apierrors.IsForbidden(err) {
			// fluxd may read only the Secrets its RBAC names (deploy/):
			// a pull secret it was not given is passed over, so its
			// images are read anonymously (and a registry's 401 names
			// no secret), rather than every registry read failing.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading image pull secret %s: %w", k, err)
		}
		cfg, ok := dockerConfig(s)
		if !ok {
			continue
		}
		imgs := make([]string, 0, len(images[k]))
		for img := range images[k] {
			imgs = append(imgs, img)
		}
		sort.Strings(imgs)
		out = append(out, PullSecret{Name: k.String(), DockerConfig: cfg, Images: imgs})
	}
	return out, nil
}

// dockerConfig returns a secret's credentials in config.json format.
func dockerConfig(s *corev1.Secret) ([]byte, bool) {
	switch s.Type {
	case corev1.SecretTypeDockerConfigJson:
		b, ok := s.Data[corev1.DockerConfigJsonKey]
		return b, ok
	case corev1.SecretTypeDockercfg:
		// The legacy format is the "auths" map alone.
		b, ok := s.Data[corev1.DockerConfigKey]
		if !ok {
			return nil, false
		}
		wrapped, err := json.Marshal(map[string]json.RawMessage{"auths": b})
		return wrapped, err == nil
	}
	return nil, false
}

type podSpec struct {
	namespace string
	spec      corev1.PodSpec
}

// NamedSecrets returns the docker configs of the Secrets named
// "namespace/name": registry credentials fluxd is told to use for every
// workload (--registry-secret). A missing Secret is an error naming it.
func (c *Cluster) NamedSecrets(ctx context.Context, names []string) ([][]byte, error) {
	var out [][]byte
	for _, n := range names {
		ns, name, ok := strings.Cut(n, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("registry secret %q: write NAMESPACE/NAME", n)
		}
		s, err := c.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading registry secret %s: %w", n, err)
		}
		cfg, ok := dockerConfig(s)
		if !ok {
			return nil, fmt.Errorf("registry secret %s is of type %s; it must be kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg", n, s.Type)
		}
		out = append(out, cfg)
	}
	return out, nil
}
