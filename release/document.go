package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/platform"
)

// Document is workload id's manifest as git defines it in file (relative
// to the repository's root), as a release would apply it: its YAML
// document alone, or what a kustomization file builds. It reads the
// revision fluxd last fetched, under the git lock, and returns it.
func (e *Engine) Document(ctx context.Context, file string, id platform.ID) (rev string, doc []byte, err error) {
	err = e.Read(ctx, false, false, func(r, root string, _ []string) error {
		rev = r
		if gitrepo.IsKustomization(file) {
			doc, err = gitrepo.BuiltWorkload(root, file, id)
			return err
		}
		content, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
		if err != nil {
			return fmt.Errorf("reading %s: %w", file, err)
		}
		doc, err = gitrepo.WorkloadDocument(content, id)
		return err
	})
	return rev, doc, err
}
