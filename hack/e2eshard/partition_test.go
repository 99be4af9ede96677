package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const e2eDir = "../../e2e"

// e2eTests are the tests of ./e2e as the compiled binary lists them
// (go test -list, which starts no stack), or, under -short, as its
// sources declare them.
func e2eTests(t *testing.T) []string {
	t.Helper()
	declared, err := TestFuncs(e2eDir)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		return declared
	}
	cmd := exec.Command("go", "test", "-list", ".", ".")
	cmd.Dir = e2eDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go test -list . ./e2e: %v\n%s", err, stderr.Bytes())
	}
	var listed []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "ok ") && !strings.HasPrefix(l, "Benchmark") {
			listed = append(listed, l)
		}
	}
	sort.Strings(listed)
	if diff := cmp.Diff(declared, listed); diff != "" {
		t.Errorf("the tests the sources declare differ from the binary's list (-declared +listed):\n%s", diff)
	}
	return listed
}

func TestEveryE2ETestLandsInExactlyOneShard(t *testing.T) {
	tests := e2eTests(t)
	d, err := ReadDurations(filepath.Join(e2eDir, "testdata", "durations.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	real, err := RealNodeTests(e2eDir)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprintf("%d shards", n), func(t *testing.T) {
			shards := Partition(tests, n, d, real)
			if len(shards) != n {
				t.Fatalf("%d shards, want %d", len(shards), n)
			}
			if err := checkEveryTestOnce(tests, shards); err != nil {
				t.Fatal(err)
			}
			for i, s := range shards {
				for _, name := range s.Tests {
					if real[name] && i != 0 {
						t.Errorf("%s needs the real node and is in shard %d, not 1", name, i+1)
					}
				}
				// The pattern a shard runs selects exactly its tests.
				re := regexp.MustCompile(RunPattern(s.Tests))
				var matched []string
				for _, name := range tests {
					if re.MatchString(name) {
						matched = append(matched, name)
					}
				}
				if diff := cmp.Diff(s.Tests, matched); diff != "" {
					t.Errorf("shard %d's -test.run selects other tests (-shard +selected):\n%s", i+1, diff)
				}
			}
		})
	}
}

// The tests known to start pods on the real node are found, through the
// helpers they call, and a test that only uses the fake nodes is not.
func TestRealNodeTestsAreFound(t *testing.T) {
	real, err := RealNodeTests(e2eDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"TestRealNodeRunsAPod", "TestFluxdInAPod", "TestRealRollouts", "TestJobCheckOnTheRealNode", "TestPromotionJobCheckOnTheRealNode", "TestStatusPagePodLogOnRealNode", "TestInstallGuide"} {
		if !real[name] {
			t.Errorf("%s runs on the real node and was not found", name)
		}
	}
	if real["TestTorture"] {
		t.Errorf("TestTorture runs on fake nodes and was counted as a real-node test")
	}
	t.Logf("%d real-node tests: %v", len(real), keys(real))
}

func TestPartitionDealsLongestFirst(t *testing.T) {
	d := Durations{"TestA": 100, "TestB": 60, "TestC": 50, "TestD": 40, "TestR": 30}
	shards := Partition([]string{"TestNew", "TestD", "TestC", "TestB", "TestA", "TestR"}, 2, d, map[string]bool{"TestR": true})
	// TestR first to shard 1 (30); TestA to shard 2 (100); TestB to shard 1
	// (90); TestC to shard 1 (140); TestD to shard 2 (140); TestNew,
	// unknown, counts DefaultSeconds: to shard 1 (the first of two equal).
	want := []Shard{
		{Tests: []string{"TestB", "TestC", "TestNew", "TestR"}, Seconds: 140 + DefaultSeconds, RealNode: true},
		{Tests: []string{"TestA", "TestD"}, Seconds: 140},
	}
	if diff := cmp.Diff(want, shards); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDurationsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.tsv")
	want := Durations{"TestA": 12.5, "TestB": 300}
	var b bytes.Buffer
	if err := WriteDurations(&b, want); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(path, b.Bytes()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadDurations(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := writeFile(path, []byte("TestA 12\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadDurations(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a line without a tab: err %v, want one naming line 1", err)
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }

// A real-node step kept in a package-level table (a function literal in a
// var's value) marks the tests that read the table: they would otherwise
// be dealt to a shard without the real node, and skip there unseen.
func TestRealNodeTestsFollowPackageVars(t *testing.T) {
	dir := t.TempDir()
	src := `package e2e

import "testing"

var realCases = []struct {
	name string
	run  func(t *testing.T)
}{
	{"pod", func(t *testing.T) { requireRealNode(t) }},
}

var fakeCases = []string{"a"}

func requireRealNode(t *testing.T) {}

func TestTable(t *testing.T) {
	for _, c := range realCases {
		t.Run(c.name, c.run)
	}
}

func TestFake(t *testing.T) { _ = fakeCases }
`
	if err := os.WriteFile(filepath.Join(dir, "table_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	real, err := RealNodeTests(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !real["TestTable"] {
		t.Errorf("TestTable reaches the real node through realCases and was not found: %v", keys(real))
	}
	if real["TestFake"] {
		t.Errorf("TestFake was counted as a real-node test")
	}
}
