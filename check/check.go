package check

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/fluxd/fluxd/gitrepo"
)

// Service is what fluxd understood of one service's configuration.
type Service struct {
	// ID is namespace:kind/name.
	ID string `json:"id"`
	// File and Line are where it is defined, relative to the repository.
	File string `json:"file"`
	Line int    `json:"line,omitempty"`
	// Source is the Reader that found it ("workload", "argocd-image-updater").
	Source string `json:"source"`
	// Dialects are the tools whose configuration it carries.
	Dialects []string `json:"dialects,omitempty"`
	// Honoured is false for configuration fluxd reports but does not act
	// on (Argo CD Image Updater's): Suggest says what to write instead.
	Honoured    bool        `json:"honoured"`
	Automated   bool        `json:"automated"`
	Locked      bool        `json:"locked,omitempty"`
	LockMessage string      `json:"lockMessage,omitempty"`
	Containers  []Container `json:"containers,omitempty"`
	// Suggest are fluxd annotations that would say what the configuration
	// means, where fluxd does not read it as it is.
	Suggest map[string]string `json:"suggest,omitempty"`
	// Warnings are what fluxd cannot honour, or where dialects disagree.
	Warnings []string `json:"warnings,omitempty"`
}

// Container is one container (or image) of a service and its policy.
type Container struct {
	Name  string `json:"name"`
	Image string `json:"image"`
	// Filter is the tag filter in fluxd's syntax; "" means tags written
	// like the running version.
	Filter string `json:"filter,omitempty"`
	// Order is how passing tags are ranked, when not by version.
	Order string `json:"order,omitempty"`
	// Pinned: releases write repository:tag@digest.
	Pinned bool `json:"pinned,omitempty"`
	// FollowsTag: automation keeps the tag and follows its digest.
	FollowsTag bool `json:"followsTag,omitempty"`
}

// Report is what fluxd understood of a whole repository.
type Report struct {
	Services []Service `json:"services"`
	// Pipelines are the promotion Pipelines found (docs/promotion.md).
	Pipelines []Pipeline `json:"pipelines,omitempty"`
	// Problems are files or documents that could not be read.
	Problems []string `json:"problems,omitempty"`
}

// Reader finds the services of one format under dirs (absolute
// directories inside root).
type Reader interface {
	Read(root string, dirs []string) ([]Service, []string, error)
}

// Readers are the formats fluxd reads, in the order they are reported.
func Readers() []Reader { return []Reader{Workloads{}, ArgoCDImageUpdater{}} }

// Repository reads the repository checked out at root, under paths
// (fluxd's --git-path; none means the whole repository), with readers
// (Readers() when none are given).
func Repository(root string, paths []string, readers ...Reader) (*Report, error) {
	// Kustomize builds need an absolute root.
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	dirs, err := gitrepo.ResolvePaths(root, paths)
	if err != nil {
		return nil, err
	}
	if len(readers) == 0 {
		readers = Readers()
	}
	r := &Report{Services: []Service{}}
	for _, rd := range readers {
		svcs, problems, err := rd.Read(root, dirs)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", root, err)
		}
		r.Services = append(r.Services, svcs...)
		r.Problems = append(r.Problems, problems...)
	}
	sort.SliceStable(r.Services, func(i, j int) bool { return r.Services[i].ID < r.Services[j].ID })
	ids := make(map[string]bool, len(r.Services))
	for _, s := range r.Services {
		ids[s.ID] = true
	}
	ps, problems, err := pipelines(root, dirs, ids)
	if err != nil {
		return nil, fmt.Errorf("reading %s's Pipelines: %w", root, err)
	}
	r.Pipelines = ps
	r.Problems = append(r.Problems, problems...)
	return r, nil
}
