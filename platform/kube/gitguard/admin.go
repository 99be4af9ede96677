package gitguard

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// AdminReviews answers Config.Admin with SubjectAccessReviews: a
// ServiceAccount is an admin when it may do every verb on every resource
// of every group in every namespace (cluster-admin, or a binding as
// wide). Answers are kept for ttl, so that a sync of many objects naming
// one ServiceAccount asks once. fluxd needs create on
// subjectaccessreviews (authorization.k8s.io) for it; without it every
// answer is an error, and the Guard then takes the ServiceAccount at its
// word.
func AdminReviews(rc *rest.Config, ttl time.Duration) (func(namespace, name string) (bool, error), error) {
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	type answer struct {
		admin bool
		err   error
		at    time.Time
	}
	var mu sync.Mutex
	memo := map[string]answer{}
	return func(namespace, name string) (bool, error) {
		key := namespace + "/" + name
		mu.Lock()
		a, ok := memo[key]
		mu.Unlock()
		if ok && time.Since(a.at) < ttl {
			return a.admin, a.err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rev, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + namespace + ":" + name,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "*", Group: "*", Resource: "*"},
		}}, metav1.CreateOptions{})
		a = answer{at: time.Now()}
		if err != nil {
			a.err = fmt.Errorf("asking the API server whether ServiceAccount %s is an admin (a SubjectAccessReview; fluxd needs create on subjectaccessreviews.authorization.k8s.io): %w", key, err)
		} else {
			a.admin = rev.Status.Allowed
		}
		mu.Lock()
		memo[key] = a
		mu.Unlock()
		return a.admin, a.err
	}, nil
}
