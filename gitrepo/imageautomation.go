package gitrepo

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
)

// attachImageAutomation makes each Flux v2 ImagePolicy found in git a
// service, NS:imagepolicy/NAME, as Flux v2's controllers would act on it:
//
//   - its containers are the fields marked with it ($imagepolicy) in the
//     files under the update.path of an ImageUpdateAutomation of the
//     policy's namespace; each is named by its file, object and path;
//   - it is automated when such an automation covers one of its fields
//     and is not suspended, unless fluxd's own annotation on the
//     ImagePolicy says otherwise; fluxctl lock writes fluxd's lock
//     annotation on the ImagePolicy;
//   - an automated release's commit is authored as the automation's
//     git.commit.author says.
//
// What it cannot honour is said in the service's warnings.
func attachImageAutomation(root string, a *ImageAutomation, m *Manifests) {
	if len(a.Policies) == 0 && len(a.Setters) == 0 && len(a.Automations) == 0 {
		return
	}
	repos := map[NSName]string{}
	excludes := map[NSName][]string{}
	for _, r := range a.Repositories {
		repos[r.NSName], excludes[r.NSName] = r.Image, r.Exclude
	}
	defs := map[NSName]*Definition{}
	for _, p := range a.Policies {
		id := platform.ID{Namespace: p.Namespace, Kind: "imagepolicy", Name: p.Name}
		def, ok := m.Workloads[id]
		if !ok {
			continue // defined twice: reported by FindWorkloads
		}
		p := p
		p.Exclude = excludes[p.Repository]
		def.ImagePolicy = &p
		defs[p.NSName] = def
		if repos[p.Repository] == "" {
			def.Warnings = append(def.Warnings, fmt.Sprintf("its ImageRepository %s is not in git (or has no spec.image), so fluxd cannot tell which image its fields hold; nothing it marks is released", p.Repository))
		}
	}
	// A warning about an object goes on the services it bears on: a
	// policy's own, its repository's, its namespace's automations'.
	for _, w := range a.Warnings {
		attributed := false
		for n, def := range defs {
			if strings.Contains(w, " ImagePolicy "+n.String()+":") ||
				strings.Contains(w, " ImageRepository "+def.ImagePolicy.Repository.String()+":") ||
				strings.Contains(w, " ImageUpdateAutomation "+n.Namespace+"/") {
				def.Warnings = append(def.Warnings, w)
				attributed = true
			}
		}
		if !attributed {
			m.Problems = append(m.Problems, fmt.Errorf("flux v2 image automation: %s", w))
		}
	}
	for _, s := range a.Setters {
		def, ok := defs[s.Policy]
		if !ok {
			m.Problems = append(m.Problems, Problem{File: s.File, Line: s.Line, Err: fmt.Errorf("%s is marked with the ImagePolicy %s, which is not in git under --git-path; it is left as it is", s.Field, s.Policy)})
			continue
		}
		auto := coveringAutomation(a.Automations, s)
		if auto == nil {
			def.Warnings = append(def.Warnings, fmt.Sprintf("%s is outside the update.path of every ImageUpdateAutomation in %s; as in Flux v2, it is not updated", s.Field, s.Policy.Namespace))
			continue
		}
		img := repos[def.ImagePolicy.Repository]
		if img == "" {
			continue
		}
		if k := builtBy(root, s.File); k != "" {
			def.Warnings = append(def.Warnings, fmt.Sprintf("%s is in a file the kustomization %s builds from; fluxd does not update markers there yet (not implemented): mark the kustomization's images: newTag instead", s.Field, k))
			continue
		}
		var image string
		switch s.Form {
		case FormImage:
			image = s.Value
		case FormTag:
			image = img + ":" + s.Value
		case FormName:
			def.Warnings = append(def.Warnings, fmt.Sprintf("%s holds the image name (:name form); fluxd leaves it as it is, since an ImagePolicy changes tags only", s.Field))
			continue
		case FormDigest:
			def.Warnings = append(def.Warnings, fmt.Sprintf("%s holds a digest (:digest form), which fluxd does not write yet (not implemented); it is left as it is", s.Field))
			continue
		}
		def.Setters = append(def.Setters, s)
		def.Containers = append(def.Containers, Container{Name: s.Field, Image: image})
		if auto.Suspend {
			def.Warnings = append(def.Warnings, fmt.Sprintf("the ImageUpdateAutomation %s is suspended: %s is not automated", auto.NSName, s.Field))
			continue
		}
		if def.Annotations[policy.Automated] == "" && def.Annotations[policy.Locked] != "true" {
			def.Annotations[policy.Automated] = "true"
		}
		if def.Author == nil && auto.Author.Name != "" {
			author := auto.Author
			def.Author = &author
		}
	}
	for _, def := range defs {
		sortSetters(def.Setters)
	}
}

// coveringAutomation is the automation of s's policy's namespace whose
// update.path holds s's file, or nil.
func coveringAutomation(autos []ImageUpdateAutomation, s Setter) *ImageUpdateAutomation {
	for i := range autos {
		u := &autos[i]
		if u.Namespace != s.Policy.Namespace {
			continue
		}
		p := filepath.ToSlash(filepath.Clean(strings.TrimPrefix(u.Path, "/")))
		if p == "." || s.File == p || strings.HasPrefix(s.File, p+"/") {
			return u
		}
	}
	return nil
}

// builtBy is the kustomization file of the nearest directory above file
// (or beside it) that holds one, when file is not that kustomization
// file itself: the objects in file reach the cluster through its build.
func builtBy(root, file string) string {
	if IsKustomization(file) {
		return ""
	}
	for dir := filepath.Dir(filepath.FromSlash(file)); ; dir = filepath.Dir(dir) {
		if k := KustomizationFile(filepath.Join(root, dir)); k != "" {
			return filepath.ToSlash(filepath.Join(dir, k))
		}
		if dir == "." || dir == "/" || dir == "" {
			return ""
		}
	}
}
