package daemon

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxd/fluxd/internal/editdistance"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
)

// resolve turns what a person typed into a service: a full ID
// (namespace:kind/name), or namespace/name, kind/name (as kubectl writes
// it) or name where unambiguous.
func (d *Daemon) resolve(ctx context.Context, name string) (Service, error) {
	all, err := d.services(ctx)
	if err != nil {
		return Service{}, err
	}
	return resolveIn(all, name)
}

// resolveFresh is resolve that, when the name is unknown, reads git again
// before giving up: the service may have been pushed a moment ago.
func (d *Daemon) resolveFresh(ctx context.Context, name string) (Service, error) {
	svc, err := d.resolve(ctx, name)
	if fluxerr.KindOf(err) != fluxerr.Missing {
		return svc, err
	}
	if _, err := d.readManifestsNow(ctx); err != nil {
		return Service{}, err
	}
	return d.resolve(ctx, name)
}

// resolveInGit is resolveFresh for a command that needs the service in
// git (a policy change): a service fluxd knows only from the cluster is
// looked for in git again before the command is refused, since its
// manifest may have been pushed a moment ago.
func (d *Daemon) resolveInGit(ctx context.Context, name string) (Service, error) {
	svc, err := d.resolveFresh(ctx, name)
	if err != nil || svc.InGit {
		return svc, err
	}
	if _, err := d.readManifestsNow(ctx); err != nil {
		return Service{}, err
	}
	return d.resolve(ctx, name)
}

func resolveIn(all []Service, name string) (Service, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Service{}, fluxerr.New(fluxerr.User, fmt.Errorf("no service given"), "Name a service as namespace:kind/name, namespace/name, kind/name or name; 'fluxctl list-services' lists them.")
	}
	var matches []Service
	if strings.Contains(name, ":") {
		id, err := platform.ParseID(name)
		if err != nil {
			return Service{}, fluxerr.New(fluxerr.User, err, "")
		}
		for _, s := range all {
			if s.ID == id {
				matches = append(matches, s)
			}
		}
	} else {
		ns, n, qualified := strings.Cut(name, "/")
		if !qualified {
			n, ns = name, ""
		}
		for _, s := range all {
			if s.ID.Name == n && (!qualified || s.ID.Namespace == ns) {
				matches = append(matches, s)
			}
		}
		// kubectl's kind/name ("deployment/web", "deploy/web",
		// "deployments.apps/web"), where no namespace has that name.
		if kind, ok := kubectlKind(ns); qualified && ok && len(matches) == 0 {
			for _, s := range all {
				if s.ID.Name == n && s.ID.Kind == kind {
					matches = append(matches, s)
				}
			}
		}
	}
	switch len(matches) {
	case 1:
		return matches[0], nil
	case 0:
		help := "'fluxctl list-services' lists the services fluxd knows."
		if near := closest(all, name, 3); len(near) > 0 {
			help = "Did you mean " + strings.Join(near, ", ") + "? " + help
		}
		return Service{}, fluxerr.New(fluxerr.Missing, fmt.Errorf("there is no service %q in the cluster or in git", name), help)
	}
	var ids []string
	for _, m := range matches {
		ids = append(ids, m.ID.String())
	}
	return Service{}, fluxerr.New(fluxerr.User, fmt.Errorf("%q is ambiguous: it could be %s", name, strings.Join(ids, ", ")), "Use the full ID, namespace:kind/name.")
}

// kubectlKind reads a kind as kubectl accepts it: singular or plural, its
// short name, with or without its API group.
func kubectlKind(s string) (string, bool) {
	s = strings.ToLower(s)
	for _, group := range []string{".apps", ".batch", ".helm.toolkit.fluxcd.io", ".helm.fluxcd.io"} {
		s = strings.TrimSuffix(s, group)
	}
	short := map[string]string{"deploy": "deployment", "sts": "statefulset", "ds": "daemonset", "cj": "cronjob", "hr": "helmrelease"}
	if k, ok := short[s]; ok {
		return k, true
	}
	for _, k := range platform.Kinds {
		if s == k || s == k+"s" {
			return k, true
		}
	}
	return "", false
}

// closest returns up to n service IDs whose names are nearest to name.
func closest(all []Service, name string, n int) []string {
	if i := strings.LastIndexAny(name, "/:"); i >= 0 {
		name = name[i+1:]
	}
	type scored struct {
		id   string
		dist int
	}
	var c []scored
	for _, s := range all {
		dist := editdistance.Levenshtein(strings.ToLower(name), strings.ToLower(s.ID.Name))
		if dist <= max(2, len(name)/3) || strings.Contains(s.ID.Name, name) {
			c = append(c, scored{s.ID.String(), dist})
		}
	}
	sort.Slice(c, func(i, j int) bool { return c[i].dist < c[j].dist || c[i].dist == c[j].dist && c[i].id < c[j].id })
	var out []string
	for i := 0; i < len(c) && i < n; i++ {
		out = append(out, c[i].id)
	}
	return out
}
