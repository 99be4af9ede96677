package torture

import (
	"regexp"
	"strings"
)

// A person's edits of a manifest, as text, the way someone with an editor
// makes them: only the lines they mean to change move.

var (
	imageLine       = regexp.MustCompile(`(?m)^(\s+image: ).*$`)
	annotationsLine = regexp.MustCompile(`(?m)^(\s*)annotations:[ \t]*\n`)
	lockedLine      = regexp.MustCompile(`(?m)^\s+fluxd\.io/locked:.*\n`)
)

// SetImage sets every container image in y (the run's manifests have
// one container).
func SetImage(y, image string) string {
	return imageLine.ReplaceAllString(y, "${1}"+image)
}

// SetLocked writes fluxd.io/locked: "true" as the first annotation, or
// removes it.
func SetLocked(y string, locked bool) string {
	y = lockedLine.ReplaceAllString(y, "")
	if !locked {
		return y
	}
	loc := annotationsLine.FindStringSubmatchIndex(y)
	if loc == nil {
		return y
	}
	indent := y[loc[2]:loc[3]]
	return y[:loc[1]] + indent + "  fluxd.io/locked: \"true\"\n" + y[loc[1]:]
}

// markedLine is a line whose value carries a $imagepolicy marker: the
// key, the value in its quotes, and the comment from the spaces before
// it.
var markedLine = regexp.MustCompile(`(?m)^(\s*(?:- )?[\w.-]+:[ \t]+)(["']?)([^"'\s#]+)(["']?)([ \t]+#[ \t]*\{"\$imagepolicy":[ \t]*"([^"]+)"\}.*)$`)

// SetMarked sets every field marked with a $imagepolicy marker in y to
// image (a whole-image marker) or its tag (a :tag marker), as a person
// who edits a Flux v2 repository by hand does: the marker comment, the
// quotes and the spacing stay as they were.
func SetMarked(y, image string) string {
	tag := image[strings.LastIndex(image, ":")+1:]
	return markedLine.ReplaceAllStringFunc(y, func(l string) string {
		m := markedLine.FindStringSubmatch(l)
		v := image
		if strings.HasSuffix(m[6], ":tag") {
			v = tag
		}
		return m[1] + m[2] + v + m[4] + m[5]
	})
}

// helmTagLine is the tag of a HelmRelease's values image: {repository, tag}.
var helmTagLine = regexp.MustCompile(`(?m)^(\s+tag:[ \t]+)(["']?)([^"'\s#]+)(["']?)`)

// SetHelmTag sets the tag in a HelmRelease's values (the run's have one
// image) as a person does, in the quotes it had.
func SetHelmTag(y, tag string) string {
	return helmTagLine.ReplaceAllString(y, "${1}${2}"+tag+"${4}")
}

// newTagLine is the newTag of a kustomization's images: entry.
var newTagLine = regexp.MustCompile(`(?m)^(\s+newTag:[ \t]+)(["']?)([^"'\s#]+)(["']?)`)

// SetNewTag sets the newTag of a kustomization's images: entries (the
// run's have one) as a person does, in the quotes it had.
func SetNewTag(y, tag string) string {
	return newTagLine.ReplaceAllString(y, "${1}${2}"+tag+"${4}")
}
