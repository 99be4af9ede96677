package daemon

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/registry"
)

// isBareTag says whether a release's image is a tag alone ("1.2.0",
// "v2-rc1"): no registry, repository or digest. `--update-image 1.2.0`
// means that tag of the named services' own repository. A Docker Hub
// library image is written with its tag ("nginx:1.27"), so a bare word
// is never read as one.
func isBareTag(image string) bool {
	return image != "" && !strings.ContainsAny(image, "/:@") && registry.ValidTag(image)
}

// imageForTag is the full image a bare tag means for the named services:
// their one repository, with that tag. Services that run several
// repositories, or none named at all, are refused: the image must then
// be given in full.
func (d *Daemon) imageForTag(ctx context.Context, ids []platform.ID, tag string) (string, error) {
	if len(ids) == 0 {
		return "", fluxerr.New(fluxerr.User, fmt.Errorf("%q is a tag alone, and no service is named to take its repository from", tag),
			"Name the services (--service) whose own repository the tag is of, or give the full image, REPOSITORY:TAG. Nothing was changed.")
	}
	repos := map[string][]string{}
	for _, id := range ids {
		svc, err := d.resolve(ctx, id.String())
		if err != nil {
			return "", err
		}
		// git's images: the plan edits git, and the cluster may run a
		// mirror's copy (an admission webhook's rewrite) or an older
		// repository git has moved on from.
		images := svc.GitImages
		if len(images) == 0 {
			images = map[string]string{}
			for _, c := range svc.Containers {
				images[c.Name] = c.Image
			}
		}
		for name, image := range images {
			ref, err := registry.ParseRef(image)
			if err != nil {
				continue
			}
			repos[ref.Repository] = append(repos[ref.Repository], id.String()+" "+name)
		}
	}
	switch len(repos) {
	case 1:
		for repo := range repos {
			return repo + ":" + tag, nil
		}
	case 0:
		return "", fluxerr.New(fluxerr.User, errors.New("the named services run no image with a repository to give the tag "+tag),
			"Give the full image, REPOSITORY:TAG. Nothing was changed.")
	}
	var names []string
	for repo, where := range repos {
		sort.Strings(where)
		names = append(names, repo+" ("+strings.Join(where, ", ")+")")
	}
	sort.Strings(names)
	return "", fluxerr.New(fluxerr.User, fmt.Errorf("the tag %q could be of several repositories: %s", tag, strings.Join(names, "; ")),
		"Give the full image, REPOSITORY:TAG, to say which. Nothing was changed.")
}
