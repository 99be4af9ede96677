package gitrepo

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/fluxd/fluxd/platform"
)

// kustomizationNames are the file names kustomize looks for in a
// directory, in its order.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// KustomizationFile is the kustomization file in dir (absolute), or ""
// when dir holds none.
func KustomizationFile(dir string) string {
	for _, n := range kustomizationNames {
		if fi, err := os.Lstat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
			return n
		}
	}
	return ""
}

// kustomizer builds the kustomizations of one clone. It builds from a
// copy of the clone's files in memory, not from the disk: the
// repository's content is not fluxd's to trust, and kustomize on disk
// would follow a base or a symbolic link out of the clone (to /etc, or
// another tenant's files). The copy holds regular files only, each of at
// most MaxFileSize bytes, as ReadFile reads them.
type kustomizer struct {
	fs filesys.FileSystem
	k  *krusty.Kustomizer
}

func newKustomizer(root string) (*kustomizer, error) {
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // a link, a device: not copied, so not followed
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		b, err := ReadFile(root, rel)
		if err != nil {
			return nil // too big or unreadable: a kustomization naming it reports it missing
		}
		return mem.WriteFile("/"+filepath.ToSlash(rel), b)
	})
	if err != nil {
		return nil, fmt.Errorf("reading the repository for kustomize: %w", err)
	}
	opts := krusty.MakeDefaultOptions() // files under the kustomization's root only, no plugins
	return &kustomizer{fs: mem, k: krusty.MakeKustomizer(opts)}, nil
}

// build runs kustomize on the directory rel (relative to the clone's
// root) and returns the objects it makes, each named by the
// kustomization's file.
func (k *kustomizer) build(rel string) ([]platform.Object, error) {
	dir := "/" + filepath.ToSlash(rel)
	file := path.Join(filepath.ToSlash(rel), kustomizationIn(k.fs, dir))
	rm, err := k.k.Run(k.fs, dir)
	if err != nil {
		return nil, Problem{File: file, Err: fmt.Errorf("kustomize build failed: %w", err)}
	}
	var out []platform.Object
	for _, r := range rm.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, Problem{File: file, Err: fmt.Errorf("kustomize build: %s: %w", r.CurId(), err)}
		}
		m := map[string]any{}
		if err := utilyaml.Unmarshal(b, &m); err != nil {
			return nil, Problem{File: file, Err: fmt.Errorf("kustomize build: %s: %w", r.CurId(), err)}
		}
		out = append(out, platform.Object{File: file, Manifest: m})
	}
	return out, nil
}

func kustomizationIn(fs filesys.FileSystem, dir string) string {
	for _, n := range kustomizationNames {
		if fs.Exists(path.Join(dir, n)) {
			return n
		}
	}
	return kustomizationNames[0]
}
