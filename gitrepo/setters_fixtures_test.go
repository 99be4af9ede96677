package gitrepo

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
	"golang.org/x/tools/txtar"
)

// fixtures reads the txtar archives in dir, each a case named after its
// file (the Flux v2 rule it checks; its comment says more).
func fixtures(t *testing.T, dir string) map[string]*txtar.Archive {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*.txtar"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in testdata/%s: %v", dir, err)
	}
	out := map[string]*txtar.Archive{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".txtar")] = txtar.Parse(b)
	}
	return out
}

// TestSetSettersFixtures: every change of "changes" (FIELD, FROM and TO,
// tab-separated) is made to its file under in/, which must then read as
// the file under want/, byte for byte.
func TestSetSettersFixtures(t *testing.T) {
	t.Parallel()
	for name, a := range fixtures(t, "setters") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := txtarFiles(a)
			byFile := map[string][]SetterChange{}
			for _, line := range strings.Split(strings.TrimSpace(files["changes"]), "\n") {
				f := strings.Split(line, "\t")
				if len(f) != 3 {
					t.Fatalf("changes: %q is not FIELD\\tFROM\\tTO", line)
				}
				file, _, _ := strings.Cut(f[0], ":")
				byFile[file] = append(byFile[file], SetterChange{Field: f[0], From: f[1], To: f[2]})
			}
			for file, changes := range byFile {
				out, err := SetSetters(platform.ID{Namespace: "ns", Kind: "imagepolicy", Name: "p"}, file, []byte(files["in/"+file]), changes)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(files["want/"+file], string(out)); diff != "" {
					t.Errorf("%s (-want +got)\n%s", file, diff)
				}
			}
		})
	}
}

// TestImagePolicyFixtures: the repository of each archive (every file
// but want and warnings) read as fluxd reads it gives the ImagePolicy
// services of "want" (one line per field: ID, "automated" when it is,
// field, image; an ID alone for a policy with none), and a warning
// holding each line of "warnings".
func TestImagePolicyFixtures(t *testing.T) {
	t.Parallel()
	for name, a := range fixtures(t, "automation") {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := txtarFiles(a)
			repo := map[string]string{}
			for f, content := range files {
				if f != "want" && f != "warnings" {
					repo[f] = content
				}
			}
			m := automationRepo(t, repo)
			var got, warnings []string
			for _, id := range sortedIDs(m.Workloads) {
				def := m.Workloads[id]
				if def.ImagePolicy == nil {
					continue
				}
				warnings = append(warnings, def.Warnings...)
				auto := ""
				if def.Annotations[policy.Automated] == "true" {
					auto = " automated"
				}
				if len(def.Containers) == 0 {
					got = append(got, id.String()+auto)
				}
				for _, c := range def.Containers {
					got = append(got, id.String()+auto+" "+c.Name+" "+c.Image)
				}
			}
			sort.Strings(got)
			if diff := cmp.Diff(strings.Split(strings.TrimSpace(files["want"]), "\n"), got); diff != "" {
				t.Errorf("services (-want +got)\n%s", diff)
			}
			for _, w := range strings.Split(strings.TrimSpace(files["warnings"]), "\n") {
				if w != "" && !strings.Contains(strings.Join(warnings, "\n"), w) {
					t.Errorf("no warning %q in:\n%s", w, strings.Join(warnings, "\n"))
				}
			}
		})
	}
}

// txtarFiles is an archive's files by name.
func txtarFiles(a *txtar.Archive) map[string]string {
	out := make(map[string]string, len(a.Files))
	for _, f := range a.Files {
		out[f.Name] = string(f.Data)
	}
	return out
}
