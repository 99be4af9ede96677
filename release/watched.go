package release

import (
	"fmt"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// watched refuses an image whose repository no service runs, in git (m)
// or in the cluster (ws): fluxd contacts a registry only for a repository
// a service it watches runs, so that a caller cannot make it send
// requests to a host of the caller's choosing (an internal address, a
// cloud metadata service).
//
// With a scope, only the services in it count: a scoped instance may not
// read, through a plan's errors, the tags of a repository only another
// team's services run.
func watched(image string, m *gitrepo.Manifests, ws []platform.Workload, scope *auth.Scope) error {
	ref, err := registry.ParseRef(image)
	if err != nil {
		return fluxerr.New(fluxerr.User, err, "")
	}
	var running []string
	if m != nil {
		for id, def := range m.Workloads {
			if scope != nil && !scope.Contains(id.Namespace, def.File) {
				continue
			}
			for _, c := range def.Containers {
				running = append(running, c.Image)
			}
		}
	}
	for _, w := range ws {
		if scope != nil {
			file := ""
			if m != nil && m.Workloads[w.ID] != nil {
				file = m.Workloads[w.ID].File
			}
			if !scope.Contains(w.ID.Namespace, file) {
				continue
			}
		}
		for _, c := range w.Containers {
			running = append(running, c.Image)
		}
	}
	if registry.RunsRepository(running, ref.Repository) {
		return nil
	}
	return fluxerr.New(fluxerr.User, fmt.Errorf("no service runs an image of %s, so fluxd does not contact its registry", ref.Repository),
		"fluxd reads a registry only for repositories that a service it watches runs, in the cluster or in git. Check the image name for typos "+
			"(list-services shows what runs); to start running a new repository, change the manifest in git. Nothing was requested.")
}
