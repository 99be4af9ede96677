package promotion

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ID names a pipeline across replicas and clusters: namespace/name. The
// store keys everything by it.
func (p Pipeline) ID() string { return p.Namespace + "/" + p.Name }

// Load reads the Pipelines of the plain YAML files under dirs (each
// under root, the checkout; files are named relative to it). A file
// with a bad Pipeline gives its problems and the rest are still read;
// CheckAll's problems across pipelines are included. A Pipeline made by
// a kustomize build is not read: files are read as they are written.
//
// It reads files the caller checked out; it never reaches git itself.
func Load(root string, dirs []string) ([]Pipeline, []Problem, error) {
	var all []Pipeline
	var problems []Problem
	seen := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if path != dir && strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if seen[path] || (!strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml")) {
				return nil
			}
			seen[path] = true
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if !bytes.Contains(b, []byte("fluxd.io/")) {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			ps, probs := Parse(filepath.ToSlash(rel), b)
			all = append(all, ps...)
			problems = append(problems, probs...)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	problems = append(problems, CheckAll(all)...)
	return all, problems, nil
}
