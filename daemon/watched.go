package daemon

import (
	"context"
	"fmt"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/registry"
)

// watched refuses a repository that no service fluxd watches runs, in
// the cluster or in git, before any request is made for it: a
// notification (fluxctl notify, a webhook's payload) names a repository,
// and fluxd must not contact any host a caller names. A plan checks the
// same in release, against the manifests it reads.
func (d *Daemon) watched(ctx context.Context, repository string) error {
	svcs, err := d.services(ctx)
	if err != nil {
		return err
	}
	var images []string
	for _, s := range svcs {
		for _, c := range s.Containers {
			images = append(images, c.Image)
		}
		for _, img := range s.GitImages {
			images = append(images, img)
		}
	}
	if registry.RunsRepository(images, repository) {
		return nil
	}
	return fluxerr.New(fluxerr.User, fmt.Errorf("no service runs an image of %s, so fluxd does not contact its registry", repository),
		"fluxd reads a registry only for repositories that a service it watches runs, in the cluster or in git (list-services shows them). "+
			"Check the repository's name, registry host included; a notification for a repository no service runs changes nothing anyway. Nothing was requested.")
}
