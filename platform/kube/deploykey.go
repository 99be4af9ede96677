package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/fluxd/fluxd/internal/fluxerr"
)

// DeployKeyField is the key of a deploy key Secret's data holding the
// private key (OpenSSH PEM), as Flux v1's flux-git-deploy Secret had it.
const DeployKeyField = "identity"

// SSHAuthKeyField is where a Secret of type kubernetes.io/ssh-auth keeps
// its private key; fluxd reads it there too when "identity" is absent.
const SSHAuthKeyField = corev1.SSHAuthPrivateKey

// AnnotationDeployKeyHeld marks a deploy key Secret that has held a key
// fluxd used, with when fluxd first stored or read it. A Secret so marked
// and found empty lost its key (a kubectl apply that emptied it, say):
// fluxd then refuses to generate another, which would silently need a new
// deploy key on the git host.
const AnnotationDeployKeyHeld = "fluxd.io/deploy-key-held-since"

// DeployKey returns the SSH private key kept in the Secret namespace/name
// under DeployKeyField (or SSHAuthKeyField). When the Secret holds none,
// it stores the one generate makes and returns it, created true; but a
// Secret marked AnnotationDeployKeyHeld and found empty is an error, and
// so is one holding data under other keys only.
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
		k := s.Data[DeployKeyField]
		if len(k) == 0 {
			k = s.Data[SSHAuthKeyField]
		}
		if len(k) > 0 {
			key, created = k, false
			if _, marked := s.Annotations[AnnotationDeployKeyHeld]; marked {
				return nil
			}
			// Marked once, so that losing it later is noticed. Best
			// effort: the key is usable either way.
			s = s.DeepCopy()
			metav1.SetMetaDataAnnotation(&s.ObjectMeta, AnnotationDeployKeyHeld, time.Now().UTC().Format(time.RFC3339))
			if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: "fluxd"}); apierrors.IsConflict(err) {
				return err // read again
			}
			return nil
		}
		if len(s.Data) > 0 {
			var fields []string
			for f := range s.Data {
				fields = append(fields, f)
			}
			slices.Sort(fields)
			return &keyFieldError{fields: fields}
		}
		if since, marked := s.Annotations[AnnotationDeployKeyHeld]; marked {
			return &keyLostError{since: since}
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
		metav1.SetMetaDataAnnotation(&s.ObjectMeta, AnnotationDeployKeyHeld, time.Now().UTC().Format(time.RFC3339))
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
	var lost *keyLostError
	var field *keyFieldError
	switch {
	case errors.As(err, &lost):
		return nil, false, fluxerr.New(fluxerr.User, fmt.Errorf("the deploy key Secret %s held a key (since %s) and is now empty: fluxd will not silently make a new one, which the git host would refuse", where, lost.since),
			fmt.Sprintf("Something removed the key: often a 'kubectl apply' of the Secret after it was filled with 'kubectl apply' (its last-applied data then empties it). Restore the key from a backup with a patch, which applying the install again leaves alone:\n  kubectl -n %s patch secret %s -p \"{\\\"data\\\":{\\\"identity\\\":\\\"$(base64 -w0 KEY)\\\"}}\"\nOr, to have fluxd generate a new key (and then add its public half, 'fluxctl identity', to the git host as a deploy key), remove the mark:\n  kubectl -n %s annotate secret %s %s-", namespace, name, namespace, name, AnnotationDeployKeyHeld))
	case errors.As(err, &field):
		return nil, false, fluxerr.New(fluxerr.User, fmt.Errorf("the deploy key Secret %s holds %s but no %q", where, strings.Join(field.fields, ", "), DeployKeyField),
			fmt.Sprintf("fluxd reads the private key (OpenSSH PEM, no passphrase) from the field %q, or %q of a kubernetes.io/ssh-auth Secret. Put the key under one of those:\n  kubectl -n %s patch secret %s -p \"{\\\"data\\\":{\\\"identity\\\":\\\"$(base64 -w0 KEY)\\\"}}\"", DeployKeyField, SSHAuthKeyField, namespace, name))
	case apierrors.IsNotFound(err):
		return nil, false, fluxerr.New(fluxerr.User, fmt.Errorf("the deploy key Secret %s does not exist", where),
			fmt.Sprintf("The install ships it empty (Secret %s in deploy/); fluxd fills it with a key it generates. Apply the install again, or create it empty:\n  kubectl -n %s create secret generic %s", name, namespace, name))
	case apierrors.IsForbidden(err):
		return nil, false, fluxerr.New(fluxerr.User, fmt.Errorf("reading or writing the deploy key Secret %s: %w", where, err),
			fmt.Sprintf("fluxd's ServiceAccount needs get and update on that one Secret: the install's Role fluxd-deploy-key grants them by name (resourceNames: [%s]); check that it and its RoleBinding are applied in %s.", name, namespace))
	}
	return nil, false, fmt.Errorf("reading or writing the deploy key Secret %s: %w", where, err)
}

// keyLostError is a deploy key Secret marked as having held a key, empty.
type keyLostError struct{ since string }

func (e *keyLostError) Error() string { return "the deploy key was removed from its Secret" }

// keyFieldError is a deploy key Secret with data but no key field.
type keyFieldError struct{ fields []string }

func (e *keyFieldError) Error() string { return "the deploy key Secret has no key field" }
