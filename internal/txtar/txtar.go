// Package txtar reads the txtar archives tests keep their fixtures in:
// a comment, then files, each introduced by a line "-- NAME --", as
// golang.org/x/tools/txtar writes them (read here so that tests need not
// pull in x/tools for twenty lines).
package txtar

import "strings"

// File is one file of an archive.
type File struct {
	Name string
	Data string
}

// Archive is a comment and the files after it, in order.
type Archive struct {
	Comment string
	Files   []File
}

// Parse reads an archive. A file's data is its lines up to the next
// marker line, each with its line break.
func Parse(data string) Archive {
	var a Archive
	cur := &a.Comment
	for _, line := range strings.SplitAfter(data, "\n") {
		if name, ok := marker(line); ok {
			a.Files = append(a.Files, File{Name: name})
			cur = &a.Files[len(a.Files)-1].Data
			continue
		}
		*cur += line
	}
	return a
}

// Map is the archive's files by name.
func (a Archive) Map() map[string]string {
	out := make(map[string]string, len(a.Files))
	for _, f := range a.Files {
		out[f.Name] = f.Data
	}
	return out
}

// marker reads a line "-- NAME --".
func marker(line string) (string, bool) {
	l := strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(l, "-- ") || !strings.HasSuffix(l, " --") || len(l) < 7 {
		return "", false
	}
	return strings.TrimSpace(l[3 : len(l)-3]), true
}
