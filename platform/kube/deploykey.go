package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/fluxd/fluxd/internal/fluxerr"
)

// DeployKeyField is the key of a deploy key Secret's data holding the
// private key (OpenSSH PEM), as Flux v1's flux-git-deploy Secret had it.
const DeployKeyField = "identity"

// DeployKey returns the SSH private key kept in the Secret namespace/name
// under DeployKeyField. When the Secret holds none, it stores the one
// generate makes and returns it, created true.
//
// The Secret must exist (the install ships it empty): fluxd is granted
// get and update on that one Secret by name, and a create cannot be
// limited to a name. The write is an update carrying the resourceVersion
// read, so that of several replicas starting at once exactly one stores
// its key: the others get a conflict, read the Secret again and use the
// key stored there.
func (c *Cluster) DeployKey(ctx context.Context, namespace, name string, generate func() ([]byte, error)) (key []byte, created bool, err error) {
	secrets := c.client.CoreV1().Secrets(namespace)
	var generated []byte
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if k := s.Data[DeployKeyField]; len(k) > 0 {
			key, created = k, false
			return nil
		}
		if generated == nil {
			if generated, err = generate(); err != nil {
				return err
			}
		}
		s = s.DeepCopy()
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[DeployKeyField] = generated
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: "fluxd"}); err != nil {
			return err
		}
		key, created = generated, true
		return nil
	})
	if err == nil {
		return key, created, nil
	}
	where := namespace + "/" + name
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, fluxerr.New(fluxerr.User, fmt.Errorf("the deploy key Secret %s does not exist", where),
			fmt.Sprintf("The install ships it empty (Secret %s in deploy/); fluxd fills it with a key it generates. Apply the install again, or create it empty:\n  kubectl -n %s create secret generic %s", name, namespace, name))
	case apierrors.IsForbidden(err):
		return nil, false, fluxerr.New(fluxerr.User, fmt.Errorf("reading or writing the deploy key Secret %s: %w", where, err),
			fmt.Sprintf("fluxd's ServiceAccount needs get and update on that one Secret: the install's Role fluxd-deploy-key grants them by name (resourceNames: [%s]); check that it and its RoleBinding are applied in %s.", name, namespace))
	}
	return nil, false, fmt.Errorf("reading or writing the deploy key Secret %s: %w", where, err)
}
