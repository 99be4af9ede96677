package release

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// Access is a Cluster that can tell, before anything is committed,
// whether fluxd may release a workload at all: whether it watches its
// namespace (--namespaces), and whether its credentials may apply it
// there. platform/kube answers the first from its configuration and the
// second with an access review. A Cluster that is not an Access is asked
// nothing.
type Access interface {
	// Watched refuses, without a request, a workload in a namespace
	// fluxd does not watch; the error wraps platform.ErrNotWatched.
	Watched(id platform.ID) error
	// MayRelease refuses a workload fluxd does not watch, or may not
	// apply (platform.ErrForbidden); any other error means it could not
	// tell.
	MayRelease(ctx context.Context, id platform.ID) error
}

// Skip reasons of a workload fluxd will not release, whatever git says.
const (
	ReasonNotWatched = "not watched"
	ReasonForbidden  = "not permitted"
)

// Refused reports whether a plan left it out because fluxd does not
// watch it or may not apply it (not because of anything in git): the
// automator waits long before asking again.
func Refused(it Item) bool {
	return it.Action == Skip && (strings.HasPrefix(it.Reason, ReasonNotWatched+":") || strings.HasPrefix(it.Reason, ReasonForbidden+":"))
}

// refusedReason is the skip reason of a refusal err (the first line of
// what happened, without the help), or "" when err is not one.
func refusedReason(err error) string {
	what := err.Error()
	var fe *fluxerr.Error
	if errors.As(err, &fe) {
		what = fe.Err.Error()
	}
	switch {
	case errors.Is(err, platform.ErrNotWatched):
		return ReasonNotWatched + ": " + what
	case errors.Is(err, platform.ErrForbidden):
		return ReasonForbidden + ": " + what
	}
	return ""
}

// accessMemo asks Access once per workload within one plan (the
// cluster reuses one review per namespace and kind).
type accessMemo struct {
	access  Access
	answers map[platform.ID]error
}

func newAccessMemo(c Cluster) *accessMemo {
	a, _ := c.(Access)
	return &accessMemo{access: a, answers: map[platform.ID]error{}}
}

// watched is Access.Watched, or nil without an Access.
func (m *accessMemo) watched(id platform.ID) error {
	if m.access == nil {
		return nil
	}
	return m.access.Watched(id)
}

// mayRelease is Access.MayRelease, asked once per workload.
func (m *accessMemo) mayRelease(ctx context.Context, id platform.ID) error {
	if m.access == nil {
		return nil
	}
	if err, ok := m.answers[id]; ok {
		return err
	}
	err := m.access.MayRelease(ctx, id)
	m.answers[id] = err
	return err
}

// refuseUnreleasable checks, for every workload the plan would apply,
// that fluxd watches it and may apply it, before anything is committed:
// the plan and the execution (which plans again under the git lock, just
// before its commit) both ask. A service named on its own is refused
// with the error, which says what to bind; with all services, or for the
// automator, its item is skipped with the reason.
func refuseUnreleasable(ctx context.Context, spec Spec, plan *Plan, m *gitrepo.Manifests, acc *accessMemo) error {
	if acc.access == nil {
		return nil
	}
	for i := range plan.Items {
		it := &plan.Items[i]
		if it.Action != Update {
			continue
		}
		for _, t := range applyTargets(*it, m) {
			err := acc.mayRelease(ctx, t.id)
			if err == nil {
				continue
			}
			reason := refusedReason(err)
			if reason == "" {
				return err // could not tell: nothing is released on a guess
			}
			if !spec.All && !spec.Automated {
				return fmt.Errorf("cannot release %s: %w", it.Service, err)
			}
			it.Action, it.Reason, it.Updates = Skip, reason, nil
			break
		}
	}
	return nil
}

// usesRepository reports whether a container of def runs an image of
// repository.
func usesRepository(def *gitrepo.Definition, repository string) bool {
	for _, c := range def.Containers {
		if ref, err := registry.ParseRef(c.Image); err == nil && ref.Repository == repository {
			return true
		}
	}
	return false
}

// RefusedReason is the skip reason for err when it says fluxd does not
// watch a workload or may not apply it ("not watched: …", "not
// permitted: …"), or "" for any other error: list-services marks
// services with it.
func RefusedReason(err error) string { return refusedReason(err) }
