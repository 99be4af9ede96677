package kube

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Each pull secret comes with the images of the workloads that use it,
// directly or through their service account, and no others.
func TestPullSecretsCarryTheirWorkloadsImages(t *testing.T) {
	deployment := func(ns, name string, spec corev1.PodSpec) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec}},
		}
	}
	secret := func(ns, name string, typ corev1.SecretType, key, cfg string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: typ, Data: map[string][]byte{key: []byte(cfg)}}
	}
	client := fake.NewClientset(
		deployment("a", "app", corev1.PodSpec{
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "pull"}, {Name: "gone"}},
			InitContainers:   []corev1.Container{{Name: "init", Image: "r.example/team-a/init:1"}},
			Containers:       []corev1.Container{{Name: "app", Image: "r.example/team-a/app:1"}},
		}),
		deployment("b", "app", corev1.PodSpec{
			ServiceAccountName: "builder",
			Containers:         []corev1.Container{{Name: "app", Image: "r.example/team-b/app:2"}},
		}),
		deployment("b", "other", corev1.PodSpec{
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "opaque"}},
			Containers:       []corev1.Container{{Name: "app", Image: "r.example/team-b/other:1"}},
		}),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "builder"}, ImagePullSecrets: []corev1.LocalObjectReference{{Name: "sa-pull"}}},
		secret("a", "pull", corev1.SecretTypeDockerConfigJson, corev1.DockerConfigJsonKey, `{"auths":{"r.example":{"auth":"YTph"}}}`),
		secret("b", "sa-pull", corev1.SecretTypeDockercfg, corev1.DockerConfigKey, `{"r.example":{"auth":"Yjpi"}}`),
		secret("b", "opaque", corev1.SecretTypeOpaque, "x", "y"),
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCluster(client, "fake", Config{})
	c.Start(ctx)
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.PullSecrets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []PullSecret{
		{Name: "a/pull", DockerConfig: []byte(`{"auths":{"r.example":{"auth":"YTph"}}}`), Images: []string{"r.example/team-a/app:1", "r.example/team-a/init:1"}},
		{Name: "b/sa-pull", DockerConfig: []byte(`{"auths":{"r.example":{"auth":"Yjpi"}}}`), Images: []string{"r.example/team-b/app:2"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PullSecrets (-want +got):\n%s", diff)
	}
}

// A pull secret fluxd's RBAC does not name is passed over, not an error
// that would fail every registry read; the ones it may read are offered.
func TestPullSecretsPassOverForbiddenSecrets(t *testing.T) {
	client := fake.NewClientset(
		&appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "app"},
			Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "granted"}, {Name: "withheld"}},
				Containers:       []corev1.Container{{Name: "app", Image: "r.example/app:1"}},
			}}},
		},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "granted"}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}},
	)
	client.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == "withheld" {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "withheld", errors.New("RBAC: not named"))
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := newCluster(client, "fake", Config{})
	c.Start(ctx)
	if err := c.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := c.PullSecrets(ctx)
	if err != nil {
		t.Fatalf("PullSecrets failed on a forbidden secret: %v", err)
	}
	want := []PullSecret{{Name: "a/granted", DockerConfig: []byte(`{"auths":{}}`), Images: []string{"r.example/app:1"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PullSecrets (-want +got):\n%s", diff)
	}
}
