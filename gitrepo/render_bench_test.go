package gitrepo

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkCheckRender is the check every push pays: both renders of a
// repository of 500 plain workloads (100 files of 5 documents) and one
// kustomization of 5, and their comparison, for one planned change.
func BenchmarkCheckRender(b *testing.B) {
	root := b.TempDir()
	files := map[string]string{}
	for f := 0; f < 100; f++ {
		var content string
		for d := 0; d < 5; d++ {
			content += deploy(fmt.Sprintf("w%d-%d", f, d), "reg/web:1.0.0", 2) + "---\n"
		}
		files[fmt.Sprintf("apps/f%d.yaml", f)] = content
	}
	var res string
	for i := 0; i < 5; i++ {
		files[fmt.Sprintf("k/base/k%d.yaml", i)] = deploy(fmt.Sprintf("k%d", i), fmt.Sprintf("reg/k%d:1.0.0", i), 1)
		res += fmt.Sprintf("k%d.yaml, ", i)
	}
	files["k/base/kustomization.yaml"] = "resources: [" + res[:len(res)-2] + "]\n"
	files["k/prod/kustomization.yaml"] = "resources: [../base]\n"
	writeFiles(b, root, files)
	id := dep("w0-0")
	out, err := SetImages([]byte(files["apps/f0.yaml"]), id, map[string]ImageChange{"app": {From: "reg/web:1.0.0", To: "reg/web:1.1.0"}})
	if err != nil {
		b.Fatal(err)
	}
	overlay := map[string][]byte{"apps/f0.yaml": out}
	dirs := []string{filepath.Join(root, "apps"), filepath.Join(root, "k/prod")}
	changes := []Change{{Workload: id, Container: "app", From: "reg/web:1.0.0", To: "reg/web:1.1.0"}}
	if _, err := os.Stat(dirs[1]); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		before, after, err := Render(root, dirs, overlay)
		if err != nil {
			b.Fatal(err)
		}
		if err := CheckRender(before, after, changes); err != nil {
			b.Fatal(err)
		}
	}
}
