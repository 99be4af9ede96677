package gitrepo

import (
	"fmt"
	"path"
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
//     policy's namespace; each is named by its file, object and path,
//     and its image is the one it stands for (setterImage: the whole
//     image, or the ImageRepository's with the tag it or the field
//     beside it holds, and a :digest field's digest where the policy
//     reflects digests);
//   - a field in a file kustomizations read (builds: file → the
//     kustomization files under --git-path whose build reads it, bases
//     and inline patches included) moves what they build (Setter.Builds:
//     an object of such a file, the objects each build makes of it, named
//     as its kustomizations' namePrefix and nameSuffix say, BuiltNames);
//     one in a kustomization's directory that no build reads is left
//     out, with a warning, since nothing would apply it;
//   - it is automated when such an automation covers one of its fields
//     and is not suspended, unless fluxd's own annotation on the
//     ImagePolicy says otherwise; fluxctl lock writes fluxd's lock
//     annotation on the ImagePolicy;
//   - an automated release's commit is authored as the automation's
//     git.commit.author says.
//
// What it cannot honour is said in the service's warnings.
func attachImageAutomation(a *ImageAutomation, m *Manifests, builds map[string][]string, affixes map[string]map[string][]affix) {
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
		def.Format = FormatSetters
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
		s.Builds = builds[s.File]
		for k, a := range affixes[s.File] {
			if s.builtNames == nil {
				s.builtNames = map[string][]string{}
			}
			s.builtNames[k] = names(s.ObjectName, a)
		}
		if len(s.Builds) == 0 && (s.Patch != nil || IsKustomization(s.File) || inKustomization(a, s.File)) {
			def.Warnings = append(def.Warnings, fmt.Sprintf("%s is in a kustomization's directory, but no kustomization fluxd builds under --git-path reads its file, so nothing would apply it; it is left as it is", s.Field))
			continue
		}
		if why := unbuildable(s); why != "" {
			def.Warnings = append(def.Warnings, why)
			continue
		}
		image, why := setterImage(a.Setters, s, img, def.ImagePolicy.ReflectsDigest())
		if why != "" {
			def.Warnings = append(def.Warnings, why)
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

// inKustomization reports whether file lies in a directory (or below
// one) that a.kustomized holds: one that fluxd builds as a whole.
func inKustomization(a *ImageAutomation, file string) bool {
	for dir := path.Dir(file); ; dir = path.Dir(dir) {
		if a.kustomized[dir] {
			return true
		}
		if dir == "." || dir == "/" || dir == "" {
			return false
		}
	}
}

// unbuildable says why a field of a kustomization (not of a resource it
// builds) cannot be released, or "": fluxd follows such a field to the
// built containers whose image it sets, so it must be an images: entry's
// (newName, newTag, digest) or a container's image in an inline patch.
// Any other (an env value in a patch) would move what the release cannot
// name, and its render check would refuse every commit.
func unbuildable(s Setter) string {
	last := ""
	if len(s.Path) > 0 {
		last, _ = s.Path[len(s.Path)-1].(string)
	}
	switch {
	case s.Patch != nil && last != "image":
		return fmt.Sprintf("%s is in an inline patch but is not a container's image; fluxd releases a patch's image fields only (not implemented for others), so it is left as it is", s.Field)
	case s.Patch == nil && IsKustomization(s.File) && (len(s.Path) == 0 || s.Path[0] != "images"):
		return fmt.Sprintf("%s is a kustomization's field outside its images: entries and inline patches; fluxd does not release it (not implemented), so it is left as it is", s.Field)
	}
	return ""
}

// setterImage is the image marked field s stands for, as a container of
// its ImagePolicy's service whose repository is img: the whole image
// it holds, or, for a part of one, img with the tag it or the field
// beside it holds (and the digest a :digest field holds). why says why
// it cannot be one, as a warning.
func setterImage(all []Setter, s Setter, img string, reflects bool) (image, why string) {
	switch s.Form {
	case FormImage:
		return s.Value, ""
	case FormTag:
		return img + ":" + s.Value, ""
	}
	tag, ok := siblingTag(all, s)
	if !ok {
		return "", fmt.Sprintf("%s holds the image's %s, and no field beside it in its object is marked with the same policy's tag (:tag, or the whole image), so fluxd cannot tell which tag it goes with; it is left as it is (mark the tag too)", s.Field, s.Form)
	}
	if s.Form == FormName {
		if s.Value != img {
			return "", fmt.Sprintf("%s (:name) holds %s, not the image of its policy's ImageRepository, %s; fluxd does not rename images, so it is left as it is (write %s there by hand)", s.Field, s.Value, img, img)
		}
		return img + ":" + tag, ""
	}
	if !reflects {
		return "", fmt.Sprintf("%s holds a digest (:digest form), but its ImagePolicy does not reflect digests (spec.digestReflectionPolicy is Never, the default); as in Flux v2, it is left as it is", s.Field)
	}
	return img + ":" + tag + "@" + s.Value, ""
}

// siblingTag is the tag held by the field beside s (in its mapping, else
// in its object) marked with the same policy's tag or whole image.
func siblingTag(all []Setter, s Setter) (string, bool) {
	tag, found := "", false
	for _, o := range all {
		if o.File != s.File || o.doc != s.doc || o.ObjectLine != s.ObjectLine || o.Policy != s.Policy ||
			pathString(o.Patch) != pathString(s.Patch) || o.patchDoc != s.patchDoc {
			continue
		}
		var t string
		switch o.Form {
		case FormTag:
			t = o.Value
		case FormImage:
			untagged, _, _ := strings.Cut(o.Value, "@")
			if i := strings.LastIndexByte(untagged, ':'); i > strings.LastIndexByte(untagged, '/') {
				t = untagged[i+1:]
			}
		}
		if t == "" {
			continue
		}
		if len(o.Path) == len(s.Path) && pathString(o.Path[:len(o.Path)-1]) == pathString(s.Path[:len(s.Path)-1]) {
			return t, true // beside it
		}
		if !found {
			tag, found = t, true
		}
	}
	return tag, found
}
