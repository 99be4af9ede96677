package check

import (
	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
	"github.com/fluxd/fluxd/release"
)

// Workloads reads the policy annotations of workloads (Deployments,
// StatefulSets, DaemonSets, CronJobs, and what kustomizations build):
// fluxd's own, Flux v1's and Keel's, as fluxd reads them.
type Workloads struct{}

// Read implements Reader.
func (Workloads) Read(root string, dirs []string) ([]Service, []string, error) {
	m, err := gitrepo.FindWorkloads(root, dirs)
	if err != nil {
		return nil, nil, err
	}
	var problems []string
	for _, p := range m.Problems {
		problems = append(problems, p.Error())
	}
	var out []Service
	for id, def := range m.Workloads {
		ann := def.Annotations
		s := Service{
			ID: id.String(), File: def.File, Line: def.Line, Source: source(id.Kind), Dialects: def.Dialects, Honoured: true,
			Automated: ann[policy.Automated] == "true", Locked: ann[policy.Locked] == "true", LockMessage: ann[policy.LockMessage],
			Warnings: append([]string(nil), def.Warnings...),
		}
		if id.Kind == "imagepolicy" && len(s.Dialects) == 0 {
			s.Dialects = []string{"flux-v2"}
		}
		for _, c := range def.Containers {
			ct := Container{Name: c.Name, Image: c.Image, Pinned: policy.Pinned(ann, c.Name)}
			ct.FollowsTag = ct.Pinned && policy.FollowsTag(ann)
			if ct.Pinned && def.Built {
				s.Warnings = append(s.Warnings, c.Name+": pinning digests through a kustomization's images: entries is not implemented yet, so fluxd does not release this container; pin the image in the base instead")
			}
			f, err := release.ContainerFilter(ann, c.Name)
			if def.Format == gitrepo.FormatSetters {
				// A Flux v2 ImagePolicy's fields are filtered by the
				// policy itself, as the release engine does.
				f, err = release.DefinitionFilter(def, c.Name)
			}
			if err != nil {
				s.Warnings = append(s.Warnings, c.Name+": "+err.Error())
			} else if f.Kind != "" {
				ct.Filter = f.String()
				if f.Kind != "semver" {
					ct.Order = string(f.Order)
				}
			}
			s.Containers = append(s.Containers, ct)
		}
		out = append(out, s)
	}
	return out, problems, nil
}

// source names the format a service was read from.
func source(kind string) string {
	switch kind {
	case platform.KindHelmRelease:
		return "helmrelease"
	case "imagepolicy":
		return "flux-v2-imagepolicy"
	}
	return "workload"
}
