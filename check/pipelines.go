package check

import (
	"fmt"
	"time"

	"github.com/fluxd/fluxd/promotion"
)

// Pipeline is what fluxd understood of one promotion Pipeline
// (docs/promotion.md).
type Pipeline struct {
	// ID is namespace/name.
	ID     string  `json:"id"`
	File   string  `json:"file"`
	Line   int     `json:"line,omitempty"`
	Stages []Stage `json:"stages"`
	// Warnings are what is wrong with it that does not stop it being
	// read: a stage's service that is not in git.
	Warnings []string `json:"warnings,omitempty"`
}

// Stage is one stage of a Pipeline, in a few words.
type Stage struct {
	Name     string   `json:"name"`
	From     string   `json:"from,omitempty"`
	Services []string `json:"services"`
	// Gates are the stage's gates in words: "auto", "soak 5s",
	// "1 approval", "check http-0 (http)", "rollback on failure".
	Gates []string `json:"gates,omitempty"`
}

// pipelines reads the Pipelines of the plain YAML files under dirs. A
// Pipeline made by a kustomize build is not read (a kustomization's
// files are read as they are written, not as built): its problems are
// left for fluxd to report when promotion is wired in.
func pipelines(root string, dirs []string, services map[string]bool) ([]Pipeline, []string, error) {
	all, probs, err := promotion.Load(root, dirs)
	if err != nil {
		return nil, nil, err
	}
	var problems []string
	for _, p := range probs {
		problems = append(problems, p.Error())
	}
	out := make([]Pipeline, 0, len(all))
	for _, p := range all {
		cp := Pipeline{ID: p.ID(), File: p.File, Line: p.Line}
		for _, st := range p.Stages {
			cs := Stage{Name: st.Name, From: st.From, Gates: gates(st)}
			for _, id := range st.Services {
				cs.Services = append(cs.Services, id.String())
				if !services[id.String()] {
					cp.Warnings = append(cp.Warnings, fmt.Sprintf("stage %s names %s, which is not a service in git (check its namespace, kind and name: 'fluxctl check' lists the services it found)", st.Name, id))
				}
			}
			cp.Stages = append(cp.Stages, cs)
		}
		out = append(out, cp)
	}
	return out, problems, nil
}

func gates(st promotion.Stage) []string {
	var g []string
	if st.Auto {
		g = append(g, "auto")
	}
	if st.Soak > 0 {
		g = append(g, "soak "+st.Soak.Round(time.Second).String())
	}
	if st.Approvals == 1 {
		g = append(g, "1 approval")
	} else if st.Approvals > 1 {
		g = append(g, fmt.Sprintf("%d approvals", st.Approvals))
	}
	for _, c := range st.Checks {
		kind := "http"
		switch {
		case c.Job != nil:
			kind = "job"
		case c.Prometheus != nil:
			kind = "prometheus"
		}
		g = append(g, fmt.Sprintf("check %s (%s)", c.Name, kind))
	}
	if st.RollbackOnFailure {
		g = append(g, "rollback on failure")
	}
	return g
}
