package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxd/fluxd/gitrepo/format"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/registry"
)

// Instance scopes. A token's instance may have a scope (auth.Scope:
// namespaces, optionally git paths). The interceptors put the caller's
// identity, scope included, in the call's context; servicesBuilt, which
// every call that lists, names, plans or notifies about services reads,
// keeps only the services in it. A service outside the scope is thus,
// to the caller, one that does not exist: "not found", with suggestions
// drawn from its own services only. What does not go through the view
// of services says so below.

// inScope returns the services of all in sc.
func inScope(sc *auth.Scope, all []Service) []Service {
	out := make([]Service, 0, len(all))
	for _, s := range all {
		if sc.Contains(s.ID.Namespace, s.File()) && settersIn(sc, s) {
			out = append(out, s)
		}
	}
	return out
}

// settersIn says whether the places its format says a release of s
// touches (format.Handler.Places) lie in sc: the namespaces a
// HelmRelease installs into besides its own (spec.targetNamespace), and,
// for a Flux v2 ImagePolicy's service, every file holding a field it
// marks and the namespace of every object holding one. Its containers
// are those fields (file, object, image): a policy in the caller's
// namespace whose marker sits in another team's file, or on another
// namespace's object, is not the caller's to see, as the release engine
// does not plan it for the caller (release.InScope).
func settersIn(sc *auth.Scope, s Service) bool {
	if s.def == nil {
		return true
	}
	for _, p := range format.Of(s.def).Places(s.def) {
		if !sc.Contains(p.Namespace, p.File) {
			return false
		}
	}
	return true
}

// File is the repository file that defines s, "" when git does not.
func (s Service) File() string {
	if s.def == nil {
		return ""
	}
	return s.def.File
}

// scopedEvents keeps the events a scoped caller may see, each as
// history.Event.For shows it to the caller's view: trimmed to the
// services (and image changes) in its scope; a sync's rendered again from
// the objects in its scope alone (their namespace in the scope, their file
// under its paths), so that its message and error name no other team's
// object. An event with nothing in the scope is left out.
func (d *Daemon) scopedEvents(ctx context.Context, evs []history.Event) ([]history.Event, error) {
	v, err := d.historyView(ctx)
	if err != nil || v == nil {
		return evs, err
	}
	out := evs[:0:0]
	for _, ev := range evs {
		if ev, ok := ev.For(v); ok {
			out = append(out, ev)
		}
	}
	return out, nil
}

// historyView is what the caller may see of the history: nil (all of it)
// without a scope.
func (d *Daemon) historyView(ctx context.Context) (*history.View, error) {
	sc := identity(ctx).Scope
	if sc == nil {
		return nil, nil
	}
	svcs, err := d.services(ctx)
	if err != nil {
		return nil, err
	}
	mine := map[string]bool{}
	for _, s := range svcs {
		mine[s.ID.String()] = true
	}
	return &history.View{
		Service: func(id string) bool { return mine[id] },
		// An object with no file (pruned: it left git) is shown only to
		// a scope not narrowed by paths: teams that share a namespace
		// split by paths= would read each other's deletions by name.
		Object: func(o history.SyncObject) bool {
			return (o.File != "" || len(sc.Paths) == 0) && sc.Contains(o.Namespace, o.File)
		},
	}, nil
}

// checkNotifyScope refuses a scoped caller's notification of a repository
// that no service in its scope runs, as "not found": the repository is
// none of its business.
func (d *Daemon) checkNotifyScope(ctx context.Context, ref registry.Ref) error {
	if identity(ctx).Scope == nil {
		return nil
	}
	svcs, err := d.services(ctx)
	if err != nil {
		return err
	}
	for _, s := range svcs {
		for _, c := range s.Containers {
			if r, err := registry.ParseRef(c.Image); err == nil && r.Repository == ref.Repository {
				return nil
			}
		}
		for _, img := range s.GitImages {
			if r, err := registry.ParseRef(img); err == nil && r.Repository == ref.Repository {
				return nil
			}
		}
	}
	return fluxerr.New(fluxerr.Missing, fmt.Errorf("no service of instance %s runs an image of %s", identity(ctx).Instance, ref.Repository),
		"A notification refreshes a repository your services use; 'fluxctl list-services' lists them and their images.")
}

// errSyncScoped refuses a scoped caller's sync: a sync applies every
// object under --git-path, every team's, beyond any scope.
var errSyncScoped = errors.New("a sync applies every object in git, every instance's, so an instance with a scope may not run one")

// checkSyncScope refuses a scoped caller's sync.
func checkSyncScope(ctx context.Context) error {
	id := identity(ctx)
	if id.Scope == nil {
		return nil
	}
	return fluxerr.New(fluxerr.Forbidden, errSyncScoped,
		fmt.Sprintf("Instance %s may act only in %s. The sync runs by itself on fluxd's --sync-interval and on every new commit; an operator with an unscoped instance's token can run it now.", id.Instance, id.Scope))
}
