package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// The status page's views of one workload: what it runs (GetResources),
// its pods' logs (GetPodLog) and its manifest in git beside the live
// object (GetManifest). Each names the service as every call does, through
// the caller's scope (resolve): a service outside it is not found, and so
// is a pod that is not the service's. Reading logs needs the deployer
// role (the interceptors: GetPodLog is not read-only), since logs may
// carry secrets; docs/security.md says why. For the same reason a viewer
// gets the manifest without the live object (redactLive).

// Resources is what the daemon needs from the cluster for these views;
// platform/kube's Cluster has it (the daemon asks its Cluster for it).
type Resources interface {
	Resources(ctx context.Context, id platform.ID) (*platform.Resources, error)
	PodLog(ctx context.Context, id platform.ID, pod string, opts platform.LogOptions) (*platform.PodLog, error)
	Compare(ctx context.Context, id platform.ID, manifest []byte) (*platform.Comparison, error)
}

// Documents reads one workload's manifest from git; release.Engine has it
// (the daemon asks its Releaser for it).
type Documents interface {
	Document(ctx context.Context, file string, id platform.ID) (rev string, doc []byte, err error)
}

// Log bounds: the page shows a tail, never a stream.
const (
	defaultLogLines = 100
	maxLogLines     = 1000
	maxLogBytes     = 64 << 10
)

func (d *Daemon) resources() (Resources, error) {
	if r, ok := d.deps.Cluster.(Resources); ok {
		return r, nil
	}
	return nil, fluxerr.New(fluxerr.Unimplemented, errors.New("this fluxd's cluster cannot report a workload's pods, events or logs"), "")
}

// WorkloadResources reports what service runs in the cluster; a service
// only in git runs nothing (inCluster false).
func (d *Daemon) WorkloadResources(ctx context.Context, service string) (Service, *platform.Resources, error) {
	svc, err := d.resolve(ctx, service)
	if err != nil {
		return Service{}, nil, err
	}
	r, err := d.resources()
	if err != nil {
		return svc, nil, err
	}
	if !svc.InCluster {
		return svc, &platform.Resources{}, nil
	}
	res, err := r.Resources(ctx, svc.ID)
	if errors.Is(err, platform.ErrNotFound) {
		// Gone since the view was built: it runs nothing now.
		return Service{ID: svc.ID, InGit: svc.InGit}, &platform.Resources{}, nil
	}
	return svc, res, err
}

// PodLog reads the tail of a pod's log, bounded (at most maxLogLines
// lines and maxLogBytes bytes).
func (d *Daemon) PodLog(ctx context.Context, service, pod, container string, lines int) (Service, *platform.PodLog, error) {
	svc, err := d.resolve(ctx, service)
	if err != nil {
		return Service{}, nil, err
	}
	r, err := d.resources()
	if err != nil {
		return svc, nil, err
	}
	switch {
	case lines <= 0:
		lines = defaultLogLines
	case lines > maxLogLines:
		lines = maxLogLines
	}
	l, err := r.PodLog(ctx, svc.ID, pod, platform.LogOptions{Container: container, TailLines: int64(lines), LimitBytes: maxLogBytes})
	if errors.Is(err, platform.ErrNotFound) {
		return svc, nil, fluxerr.New(fluxerr.Missing, err, fmt.Sprintf("The pod may have been replaced since the page listed it: read the pods of %s again.", svc.ID))
	}
	if errors.Is(err, platform.ErrNoLog) {
		return svc, nil, fluxerr.New(fluxerr.Unavailable, err, "The node's kubelet did not answer the API server: a fake node (kwok) runs no containers and serves no logs; a real node may be down or unreachable from the API server. 'kubectl logs' answers the same.")
	}
	return svc, l, err
}

// Manifest is a workload's manifest in git beside the live object.
type Manifest struct {
	Service    platform.ID
	File       string
	Line       int
	Revision   string
	Git        []byte
	Comparison *platform.Comparison
	// Note says why something is missing.
	Note string
	// Redacted says Comparison holds no live values (redactLive).
	Redacted bool
}

// WorkloadManifest reads service's manifest from git and compares it with
// the live object (a server-side dry run of the apply a release makes).
func (d *Daemon) WorkloadManifest(ctx context.Context, service string) (*Manifest, error) {
	svc, err := d.resolve(ctx, service)
	if err != nil {
		return nil, err
	}
	out := &Manifest{Service: svc.ID}
	if svc.def == nil {
		out.Note = "not in git: fluxd knows it only from the cluster"
		return out, nil
	}
	out.File, out.Line = svc.def.File, svc.def.Line
	docs, ok := d.deps.Releaser.(Documents)
	if !ok {
		return nil, fluxerr.New(fluxerr.Unimplemented, errors.New("this fluxd cannot read one workload's manifest from git"), "")
	}
	if out.Revision, out.Git, err = docs.Document(ctx, svc.def.File, svc.ID); err != nil {
		return nil, fmt.Errorf("reading the manifest of %s from %s: %w", svc.ID, svc.def.File, err)
	}
	r, err := d.resources()
	if err != nil {
		return nil, err
	}
	if out.Comparison, err = r.Compare(ctx, svc.ID, out.Git); err != nil {
		// The manifest still shows: say why there is no diff.
		out.Note = "no comparison with the cluster: " + err.Error()
		out.Comparison = nil
	}
	if !identity(ctx).Allows(auth.Deployer) {
		out.Redacted = redactLive(out.Comparison)
	}
	return out, nil
}

// redactLive leaves out of c what the cluster holds beyond git, for a
// caller who may only read: the live object, and the values of the
// diff's lines, which are what applying git would leave and so keep
// fields that others set (a 'kubectl set env' password, a command's
// arguments, an annotation). The paths stay, so a viewer still sees
// which fields drifted; git's own values are in the manifest beside.
//
// Why all of it, not only env[].value: a secret set outside git can sit
// in any field (args, command, a probe's exec, an annotation, a
// HelmRelease's values), and a list of places to mask is a list of
// places to forget. Kubernetes' own view role reads workloads whole, but
// fluxd's viewer tokens are the ones handed out widely (a team's page, a
// screen on the wall); what a deployer may read, it may also change
// through git. It reports whether anything was left out.
func redactLive(c *platform.Comparison) bool {
	if c == nil {
		return false
	}
	redacted := len(c.Live) > 0
	c.Live = nil
	for i, line := range c.Diff {
		// "op /path: value": the first ": " ends the path or comes
		// before its end, so cutting there never keeps a value.
		if head, _, ok := strings.Cut(line, ": "); ok {
			c.Diff[i], redacted = head, true
		}
	}
	return redacted
}

// GetResources reports a workload's ReplicaSets or Jobs, pods and events.
func (s *Server) GetResources(ctx context.Context, req *fluxdv1.GetResourcesRequest) (*fluxdv1.GetResourcesResponse, error) {
	svc, res, err := s.d.WorkloadResources(ctx, req.GetService())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &fluxdv1.GetResourcesResponse{Service: svc.ID.String(), InCluster: svc.InCluster}
	for _, o := range res.Owned {
		out.Owned = append(out.Owned, &fluxdv1.OwnedResource{Kind: o.Kind, Name: o.Name, Revision: o.Revision, Desired: o.Desired, Ready: o.Ready,
			Images: o.Images, CreatedAt: stamp(o.Created)})
	}
	for _, p := range res.Pods {
		pp := &fluxdv1.Pod{Name: p.Name, Owner: p.Owner, Status: p.Status, Ready: p.Ready, Restarts: p.Restarts, Node: p.Node, CreatedAt: stamp(p.Created)}
		for _, c := range p.Containers {
			pp.Containers = append(pp.Containers, &fluxdv1.PodContainer{Name: c.Name, Image: c.Image, Ready: c.Ready, Restarts: c.Restarts,
				State: c.State, Reason: c.Reason, Init: c.Init})
		}
		out.Pods = append(out.Pods, pp)
	}
	for _, e := range res.Events {
		out.Events = append(out.Events, &fluxdv1.ResourceEvent{Object: e.Object, Type: e.Type, Reason: e.Reason, Message: e.Message,
			Count: e.Count, LastSeen: stamp(e.LastSeen)})
	}
	return out, nil
}

// GetPodLog returns the tail of a pod's log.
func (s *Server) GetPodLog(ctx context.Context, req *fluxdv1.GetPodLogRequest) (*fluxdv1.GetPodLogResponse, error) {
	_, l, err := s.d.PodLog(ctx, req.GetService(), req.GetPod(), req.GetContainer(), int(req.GetTailLines()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &fluxdv1.GetPodLogResponse{Pod: req.GetPod(), Container: l.Container, Lines: l.Lines, Truncated: l.Truncated}, nil
}

// GetManifest returns a workload's manifest in git beside the live object.
func (s *Server) GetManifest(ctx context.Context, req *fluxdv1.GetManifestRequest) (*fluxdv1.GetManifestResponse, error) {
	m, err := s.d.WorkloadManifest(ctx, req.GetService())
	if err != nil {
		return nil, toStatus(err)
	}
	out := &fluxdv1.GetManifestResponse{Service: m.Service.String(), File: m.File, Line: int32(m.Line), Revision: m.Revision, Git: string(m.Git), Note: m.Note,
		Redacted: m.Redacted}
	if c := m.Comparison; c != nil {
		out.Live, out.Action, out.Diff = string(c.Live), c.Action, c.Diff
	}
	return out, nil
}

func stamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
