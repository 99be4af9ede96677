package clidocs

import (
	"bytes"
	"os"
	"testing"

	"github.com/spf13/cobra"
)

// CheckGolden renders root and compares it with the file at path. With
// update set it rewrites the file instead: that is how `make docs` works.
// A stale file fails the test with the command to run, so CI catches a flag
// added without its documentation.
func CheckGolden(t *testing.T, root *cobra.Command, path, title, intro string, update bool) {
	t.Helper()
	got, err := Render(root, title, intro)
	if err != nil {
		t.Fatal(err)
	}
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run 'make docs' to generate it", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s is stale: the commands changed; run 'make docs' and commit the result", path)
	}
}
