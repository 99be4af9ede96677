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

// PullSecrets returns the docker configs (config.json format) of every
// image pull secret the watched workloads use: their own imagePullSecrets
// and those of their service accounts. Secrets are read from the API on
// each call, never cached in informers, so fluxd holds no copy of every
// secret in the cluster; callers cache the result briefly.
func (c *Cluster) PullSecrets(ctx context.Context) ([][]byte, error) {
	secrets := map[nsName]bool{}
	accounts := map[nsName]bool{}
	for _, l := range c.deploys {
		specs, err := l.podSpecs()
		if err != nil {
			return nil, err
		}
		for _, ps := range specs {
			for _, ref := range ps.spec.ImagePullSecrets {
				secrets[nsName{ps.namespace, ref.Name}] = true
			}
			sa := ps.spec.ServiceAccountName
			if sa == "" {
				sa = "default"
			}
			accounts[nsName{ps.namespace, sa}] = true
		}
	}
	for a := range accounts {
		sa, err := c.client.CoreV1().ServiceAccounts(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading service account %s/%s: %w", a.namespace, a.name, err)
		}
		for _, ref := range sa.ImagePullSecrets {
			secrets[nsName{a.namespace, ref.Name}] = true
		}
	}
	keys := make([]nsName, 0, len(secrets))
	for k := range secrets {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].namespace+"/"+keys[i].name < keys[j].namespace+"/"+keys[j].name })
	var out [][]byte
	for _, k := range keys {
		s, err := c.client.CoreV1().Secrets(k.namespace).Get(ctx, k.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // a dangling reference: the kubelet ignores it too
		}
		if err != nil {
			return nil, fmt.Errorf("reading image pull secret %s/%s: %w", k.namespace, k.name, err)
		}
		if cfg, ok := dockerConfig(s); ok {
			out = append(out, cfg)
		}
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
