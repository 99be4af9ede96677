package torture

import "regexp"

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
