package release

import (
	"fmt"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/gitrepo/format"
	"github.com/fluxd/fluxd/platform"
)

// edit returns the new content of every file the plan changes, applying
// the plan's updates to the files as they are now in the clone (after a
// retry, possibly a newer revision than the plan's).
func (e *Engine) edit(plan *Plan, m *gitrepo.Manifests) (map[string][]byte, error) {
	files := map[string][]byte{}
	for i := range plan.Items {
		it := &plan.Items[i]
		if it.Action != Update {
			continue
		}
		def, ok := m.Workloads[it.Service]
		if !ok {
			return nil, fmt.Errorf("%s is no longer defined in git", it.Service)
		}
		it.File = def.File
		// Every edit names the image it replaces, the plan's: git
		// holding another one refuses it (compare-and-swap). Where it
		// is written is the format's (gitrepo/format).
		if err := format.Of(def).Edit(e.repo.Dir(), def, updatesOf(*it), files); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// workloadDoc is the YAML of workload id to apply, from the file that
// defines it: its document in content, or, for a kustomization file, what
// the kustomization builds from the clone (which holds content then).
func (e *Engine) workloadDoc(file string, content []byte, id platform.ID) ([]byte, error) {
	if gitrepo.IsKustomization(file) {
		return gitrepo.BuiltWorkload(e.repo.Dir(), file, id)
	}
	return gitrepo.WorkloadDocument(content, id)
}
