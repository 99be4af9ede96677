package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
)

// ContainerImages is one container's current image and what its
// repository offers.
type ContainerImages struct {
	Container string
	Current   string
	Available []registry.Image
	// Err says why the images could not be read.
	Err error
}

// ListImages returns, for each container of the named service, the images
// of its repository, newest first.
func (d *Daemon) ListImages(ctx context.Context, _ auth.Identity, name string) (Service, []ContainerImages, error) {
	svc, err := d.resolve(ctx, name)
	if err != nil {
		return Service{}, nil, err
	}
	byRepo := map[string]ContainerImages{}
	var out []ContainerImages
	for _, c := range svc.Containers {
		ci := ContainerImages{Container: c.Name, Current: c.Image}
		ref, err := registry.ParseRef(c.Image)
		if err != nil {
			ci.Err = err
			out = append(out, ci)
			continue
		}
		if prev, ok := byRepo[ref.Repository]; ok {
			ci.Available, ci.Err = prev.Available, prev.Err
		} else {
			ci.Available, ci.Err = d.deps.Images.Images(ctx, ref.Repository)
			byRepo[ref.Repository] = ci
		}
		out = append(out, ci)
	}
	return svc, out, nil
}

// ReleaseRequest is a release as asked for: service names as typed.
type ReleaseRequest struct {
	Services  []string
	All       bool
	Exclude   []string
	Image     string
	AllLatest bool
	User      string
	Message   string
	Execute   bool
	// Checksum, on an execution, must match the plan when it runs.
	Checksum          string
	RollbackOnFailure bool
	RolloutTimeout    time.Duration
	Force             bool
	// Files select the services defined in these repository files.
	Files []string
}

// ReleaseResult is a plan, and for an execution the job that runs it.
type ReleaseResult struct {
	Plan *release.Plan
	Job  *release.JobUpdate
}

// Release plans a release for the caller's instance, or queues its
// execution as a job. An execution is planned first, so that a bad spec or
// a plan that no longer matches its checksum fails at once.
func (d *Daemon) Release(ctx context.Context, id auth.Identity, req ReleaseRequest) (*ReleaseResult, error) {
	spec := release.Spec{All: req.All, Image: req.Image, AllLatest: req.AllLatest, User: req.User, Message: req.Message,
		RollbackOnFailure: req.RollbackOnFailure, RolloutTimeout: req.RolloutTimeout, Force: req.Force}
	if err := (release.Spec{All: true, Image: req.Image, AllLatest: req.AllLatest}).Validate(); err != nil {
		return nil, err
	}
	if req.All && (len(req.Services) > 0 || len(req.Files) > 0) {
		return nil, fluxerr.New(fluxerr.User, errors.New("give services or files, or all, not both"), "")
	}
	resolveAll := func(names []string) ([]platform.ID, error) {
		var ids []platform.ID
		for _, n := range names {
			s, err := d.resolveFresh(ctx, n)
			if err != nil {
				return nil, err
			}
			ids = append(ids, s.ID)
		}
		return ids, nil
	}
	var err error
	if spec.Services, err = resolveAll(req.Services); err != nil {
		return nil, err
	}
	if spec.Exclude, err = resolveAll(req.Exclude); err != nil {
		return nil, err
	}
	for _, f := range req.Files {
		ids, err := d.servicesInFile(ctx, f)
		if err != nil {
			return nil, err
		}
		spec.Services = append(spec.Services, ids...)
	}
	plan, err := d.deps.Releaser.Plan(ctx, spec)
	if err != nil {
		return nil, err
	}
	res := &ReleaseResult{Plan: plan}
	if !req.Execute {
		return res, nil
	}
	if req.Checksum != "" && req.Checksum != plan.Checksum {
		return nil, fluxerr.New(fluxerr.Precondition,
			fmt.Errorf("the plan you confirmed no longer matches: %s", d.deps.Releaser.WhatChanged(req.Checksum, plan)),
			"Git, the registry or the cluster changed since you saw the plan. Nothing was changed; look at the new plan and confirm it again.")
	}
	if plan.Updates() == 0 {
		return res, nil
	}
	d.invalidate()
	job, err := d.deps.Jobs.Enqueue(ctx, id.Instance, spec, plan.Checksum)
	if err != nil {
		return nil, err
	}
	res.Job = &job
	return res, nil
}

// History returns the caller's instance's events, newest first. A service
// that does not exist is NotFound; one with no events has an empty list.
func (d *Daemon) History(ctx context.Context, id auth.Identity, service string, limit int) ([]history.Event, error) {
	q := history.Query{Limit: limit}
	if service != "" {
		svc, err := d.resolve(ctx, service)
		if err != nil {
			return nil, err
		}
		q.Service = svc.ID.String()
	}
	evs, err := d.deps.History.Events(ctx, id.Instance, q)
	if err != nil {
		return nil, fmt.Errorf("reading history: %w", err)
	}
	return evs, nil
}

// SetPolicy changes a service's automation or lock in git, for the
// caller's instance, and returns the commit ("" if nothing changed).
func (d *Daemon) SetPolicy(ctx context.Context, id auth.Identity, name string, typ history.Type, user, message string) (string, error) {
	svc, err := d.resolveFresh(ctx, name)
	if err != nil {
		return "", err
	}
	if !svc.InGit {
		return "", fluxerr.New(fluxerr.User, fmt.Errorf("%s is only in the cluster, not in git", svc.ID),
			"fluxd keeps policies as annotations on the workload in git; add its manifest to the repository first.")
	}
	set := map[string]string{}
	switch typ {
	case history.Automate:
		set[release.AnnotationAutomated] = "true"
		set[release.AnnotationAutomatedBy] = id.Instance
	case history.Deautomate:
		set[release.AnnotationAutomated] = "false"
	case history.Lock:
		set[release.AnnotationLocked] = "true"
		set[release.AnnotationLockMessage] = message
		set[release.AnnotationLockedBy] = user
		set[release.AnnotationLockedAt] = time.Now().UTC().Format(time.RFC3339)
	case history.Unlock:
		set[release.AnnotationLocked] = "false"
		set[release.AnnotationLockMessage] = ""
		set[release.AnnotationLockedBy] = ""
		set[release.AnnotationLockedAt] = ""
	default:
		return "", fmt.Errorf("unknown policy change %q", typ)
	}
	defer d.invalidate()
	commit, err := d.deps.Releaser.SetPolicy(ctx, id.Instance, release.PolicyChange{Service: svc.ID, Set: set, Type: typ, User: user, Message: message})
	if err == nil && d.deps.Automator != nil {
		d.deps.Automator.Kick()
	}
	return commit, err
}

// servicesInFile returns the workloads defined in a repository file.
func (d *Daemon) servicesInFile(ctx context.Context, file string) ([]platform.ID, error) {
	clean := filepath.Clean(file)
	if file == "" || filepath.IsAbs(file) || clean == ".." || strings.HasPrefix(clean, "../") {
		return nil, fluxerr.New(fluxerr.User, fmt.Errorf("--file %q is not a path inside the repository", file),
			"Give the path relative to the repository's root, as 'git ls-files' shows it, e.g. deploy/app.yaml.")
	}
	find := func(m *gitrepo.Manifests) []platform.ID {
		var ids []platform.ID
		for id, def := range m.Workloads {
			if def.File == clean {
				ids = append(ids, id)
			}
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i].String() < ids[j].String() })
		return ids
	}
	m, err := d.readManifests(ctx)
	if err != nil {
		return nil, err
	}
	if ids := find(m); len(ids) > 0 {
		return ids, nil
	}
	d.invalidate()
	if m, err = d.readManifests(ctx); err != nil {
		return nil, err
	}
	if ids := find(m); len(ids) > 0 {
		return ids, nil
	}
	return nil, fluxerr.New(fluxerr.Missing, fmt.Errorf("no workload is defined in %s", clean),
		"The file does not exist under fluxd's --git-path, or defines no Deployment, StatefulSet, DaemonSet or CronJob.")
}

// Notify refreshes the repository of image (a bare repository or one with
// a tag) at once, and wakes the automator. It returns the repository and
// how many tags it has now.
func (d *Daemon) Notify(ctx context.Context, _ auth.Identity, image string) (string, int, error) {
	ref, err := registry.ParseRef(image)
	if err != nil {
		return "", 0, fluxerr.New(fluxerr.User, err, "Give a repository such as registry.example/team/app, with or without a tag.")
	}
	imgs, err := d.deps.Images.Images(ctx, ref.Repository)
	if err != nil {
		return "", 0, err
	}
	if d.deps.Automator != nil {
		d.deps.Automator.Kick()
	}
	d.log.Info("image notification: repository refreshed", "repository", ref.Repository, "tags", len(imgs))
	return ref.Repository, len(imgs), nil
}
