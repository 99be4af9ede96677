package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/policy"
	"github.com/fluxd/fluxd/registry"
)

// argoPrefix is Argo CD Image Updater's annotation prefix.
const argoPrefix = "argocd-image-updater.argoproj.io/"

// ArgoCDImageUpdater reports Argo CD Image Updater's annotations on Argo
// CD Application objects (argocd-image-updater.argoproj.io/image-list
// and the per-image settings). fluxd does not act on them: an
// Application is not a workload, and which workloads run its images is
// only known once Argo CD renders it. For each image it says which fluxd
// annotations mean the same, to write on the workloads that run it, and
// what has no equivalent.
type ArgoCDImageUpdater struct{}

// Read implements Reader.
func (ArgoCDImageUpdater) Read(root string, dirs []string) ([]Service, []string, error) {
	objs, err := gitrepo.ReadObjects(root, dirs)
	if err != nil {
		return nil, nil, err
	}
	var out []Service
	for _, o := range objs.Objects {
		ref := o.Ref()
		if ref.Kind != "Application" || !strings.HasPrefix(ref.APIVersion, "argoproj.io/") {
			continue
		}
		ann := map[string]string{}
		if md, ok := o.Manifest["metadata"].(map[string]any); ok {
			if a, ok := md["annotations"].(map[string]any); ok {
				for k, v := range a {
					if s, ok := v.(string); ok && strings.HasPrefix(k, argoPrefix) {
						ann[strings.TrimPrefix(k, argoPrefix)] = s
					}
				}
			}
		}
		if len(ann) == 0 {
			continue
		}
		ns := ref.Namespace
		if ns == "" {
			ns = "default"
		}
		out = append(out, argoService(fmt.Sprintf("%s:application/%s", ns, ref.Name), o.File, o.Line, ann))
	}
	return out, nil, nil
}

// argoService is what fluxd makes of one Application's annotations
// (their names without the prefix).
func argoService(id, file string, line int, ann map[string]string) Service {
	s := Service{ID: id, File: file, Line: line, Source: "argocd-image-updater", Dialects: []string{"argocd-image-updater"},
		Suggest:  map[string]string{},
		Warnings: []string{"fluxd does not read Argo CD Image Updater's annotations: write the suggested fluxd annotations on the workloads that run these images (fluxd.io/tag.<container>, fluxd.io/automated)"}}
	known := map[string]bool{"image-list": true, "write-back-method": true, "update-strategy": true, "allow-tags": true, "ignore-tags": true}
	switch wb := ann["write-back-method"]; {
	case wb == "" || wb == "argocd":
		s.Warnings = append(s.Warnings, "write-back-method argocd (the default) keeps the image in the Application's parameters; fluxd always writes it to the workload's manifest in git")
	case strings.HasPrefix(wb, "git"):
		// fluxd writes to git too.
	default:
		s.Warnings = append(s.Warnings, fmt.Sprintf("write-back-method %q is not one Argo CD Image Updater knows", wb))
	}
	for _, k := range []string{"git-branch", "write-back-target", "git-repository"} {
		if _, ok := ann[k]; ok {
			known[k] = true
			s.Warnings = append(s.Warnings, argoPrefix+k+" is not read: fluxd pushes to its own --git-url and --git-branch")
		}
	}
	for _, item := range strings.Split(ann["image-list"], ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		alias, image, ok := strings.Cut(item, "=")
		if !ok {
			image, alias = item, ""
		}
		repo, constraint := image, ""
		if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
			repo, constraint = image[:i], image[i+1:]
		}
		name := alias
		if name == "" {
			name = repo
		}
		get := func(k string) string {
			known[alias+"."+k] = true
			if v, ok := ann[alias+"."+k]; ok && alias != "" {
				return v
			}
			return ann[k]
		}
		c := Container{Name: name, Image: image}
		strategy := get("update-strategy")
		allow := get("allow-tags")
		filter := ""
		switch strategy {
		case "", "semver":
			filter = "semver:" + constraint
			if constraint == "" {
				filter = "semver:*"
			}
		case "newest-build", "latest", "alphabetical", "name":
			filter = "glob:*"
			if strings.HasPrefix(allow, "regexp:") {
				filter = "regex:" + strings.TrimPrefix(allow, "regexp:")
			}
			if strategy == "alphabetical" || strategy == "name" {
				c.Order = string(registry.ByAlphabetical)
			} else {
				c.Order = string(registry.ByTime)
			}
			if constraint != "" {
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: the version constraint %q applies to semver only; Argo CD Image Updater ignores it under %s, and so does the suggestion", name, constraint, strategy))
			}
		case "digest":
			c.Pinned, c.FollowsTag = true, true
			if constraint == "" {
				constraint = "latest"
				c.Image = repo + ":latest"
			}
		default:
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: update-strategy %q is not one Argo CD Image Updater knows (semver, newest-build, alphabetical, digest)", name, strategy))
			continue
		}
		if allow != "" && allow != "any" && !strings.HasPrefix(allow, "regexp:") {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: allow-tags %q is neither regexp:... nor any", name, allow))
		}
		if strategy == "semver" || strategy == "" {
			if strings.HasPrefix(allow, "regexp:") {
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: allow-tags with semver has no fluxd equivalent: fluxd filters by the semver range alone", name))
			}
		}
		if ig := get("ignore-tags"); ig != "" {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: ignore-tags %q has no fluxd equivalent (fluxd's filters pass tags, they do not exclude them); fold it into the filter", name, ig))
		}
		c.Filter = filter
		key := policy.TagPrefix + name
		if filter != "" {
			s.Suggest[key] = filter
		}
		if c.Order != "" && c.Order != string(registry.ByTime) {
			s.Suggest[policy.TagOrder] = c.Order
		}
		if c.Pinned {
			s.Suggest[policy.PinDigestPrefix+name] = "true"
			s.Suggest[policy.FollowTag] = "true"
		}
		s.Suggest[policy.Automated] = "true"
		s.Automated = true
		s.Containers = append(s.Containers, c)
	}
	if len(s.Containers) == 0 {
		s.Warnings = append(s.Warnings, argoPrefix+"image-list names no image, so Argo CD Image Updater updates nothing here")
	}
	var unknown []string
	for k := range ann {
		if !known[k] {
			unknown = append(unknown, argoPrefix+k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		s.Warnings = append(s.Warnings, k+" has no fluxd equivalent and is not read")
	}
	return s
}
