package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// DefaultSeconds is the time a test missing from the durations table is
// taken to last: more than most take (the median was 6.5 s, the mean 20 s,
// in the first table), so that a new test is counted rather too long than
// too short until the table is refreshed.
const DefaultSeconds = 30

// Durations maps a top-level test's name to its last measured seconds.
type Durations map[string]float64

// ReadDurations reads a table written by WriteDurations: one "name<TAB>
// seconds" line per test, '#' comments. A missing file is an empty table.
func ReadDurations(path string) (Durations, error) {
	d := Durations{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, secs, ok := strings.Cut(line, "\t")
		s, err := strconv.ParseFloat(strings.TrimSpace(secs), 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("reading %s, line %d: want \"TestName<TAB>seconds\", got %q", path, n, line)
		}
		d[name] = s
	}
	return d, sc.Err()
}

// WriteDurations writes the table slowest first.
func WriteDurations(w io.Writer, d Durations) error {
	names := make([]string, 0, len(d))
	for n := range d {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if d[names[i]] != d[names[j]] {
			return d[names[i]] > d[names[j]]
		}
		return names[i] < names[j]
	})
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "# The end-to-end tests' wall times in seconds, slowest first: hack/e2eshard")
	fmt.Fprintln(bw, "# assigns tests to shards by them. Refresh: make e2e-durations (docs/development.md).")
	for _, n := range names {
		fmt.Fprintf(bw, "%s\t%.1f\n", n, d[n])
	}
	return bw.Flush()
}

// Shard is one process's share of the tests.
type Shard struct {
	Tests    []string // sorted by name
	Seconds  float64  // the sum of their expected times
	RealNode bool     // holds the tests that need the real node
}

// Partition assigns every test to exactly one of n shards, longest first,
// each to the shard expected to finish first. The tests in realNode all go
// to shard 0 (one real node per machine: those tests cannot run side by
// side), placed before the others.
func Partition(tests []string, n int, d Durations, realNode map[string]bool) []Shard {
	if n < 1 {
		n = 1
	}
	secs := func(t string) float64 {
		if s, ok := d[t]; ok {
			return s
		}
		return DefaultSeconds
	}
	order := append([]string(nil), tests...)
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if realNode[a] != realNode[b] {
			return realNode[a]
		}
		if secs(a) != secs(b) {
			return secs(a) > secs(b)
		}
		return a < b
	})
	shards := make([]Shard, n)
	seen := map[string]bool{}
	for _, t := range order {
		if seen[t] {
			continue
		}
		seen[t] = true
		i := 0
		if !realNode[t] {
			for j := range shards {
				if shards[j].Seconds < shards[i].Seconds {
					i = j
				}
			}
		} else {
			shards[0].RealNode = true
		}
		shards[i].Tests = append(shards[i].Tests, t)
		shards[i].Seconds += secs(t)
	}
	for i := range shards {
		sort.Strings(shards[i].Tests)
	}
	return shards
}

// RunPattern is the -test.run pattern that selects exactly these top-level
// tests (and all their subtests).
func RunPattern(tests []string) string {
	q := make([]string, len(tests))
	for i, t := range tests {
		q[i] = regexp.QuoteMeta(t)
	}
	return "^(" + strings.Join(q, "|") + ")$"
}

// realNodeMarkers are the names whose use means a test needs the real
// node: the helper that skips without one, the toleration that schedules
// a pod there, the stack's answers about it, and a stack started with one.
var realNodeMarkers = map[string]bool{
	"requireRealNode": true,
	"OnRealNode":      true,
	"HasRealNode":     true,
	"NodeIP":          true,
	"RealNodeName":    true,
}

// RealNodeTests reads the package's _test.go files in dir and returns its
// top-level tests that reach the real node: a test whose body, or any
// function of the package it names (transitively), uses a marker above or
// sets RealNode: true in a literal. Over-counting only costs balance.
func RealNodeTests(dir string) (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	uses := map[string]map[string]bool{} // function or method name -> names it mentions
	marked := map[string]bool{}
	var tests []string
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("reading the end-to-end tests: %w", err)
		}
		// inspect notes the names node mentions under name, and marks
		// name when one is a marker.
		inspect := func(name string, node ast.Node) {
			if uses[name] == nil {
				uses[name] = map[string]bool{}
			}
			ast.Inspect(node, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.Ident:
					uses[name][x.Name] = true
					if realNodeMarkers[x.Name] {
						marked[name] = true
					}
				case *ast.KeyValueExpr:
					k, kok := x.Key.(*ast.Ident)
					v, vok := x.Value.(*ast.Ident)
					if kok && vok && k.Name == "RealNode" && v.Name == "true" {
						marked[name] = true
					}
				}
				return true
			})
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Body == nil {
					continue
				}
				if d.Recv == nil && isTest(d) {
					tests = append(tests, d.Name.Name)
				}
				inspect(d.Name.Name, d.Body)
			case *ast.GenDecl:
				// A package-level var's value (a table of cases with
				// function literals) counts for the var's names, so
				// that a test that reads the table is marked.
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for _, id := range vs.Names {
						for _, v := range vs.Values {
							inspect(id.Name, v)
						}
					}
				}
			}
		}
	}
	// Spread the mark to every function that names a marked one.
	for changed := true; changed; {
		changed = false
		for fn, names := range uses {
			if marked[fn] {
				continue
			}
			for n := range names {
				if marked[n] {
					marked[fn] = true
					changed = true
					break
				}
			}
		}
	}
	out := map[string]bool{}
	for _, t := range tests {
		if marked[t] {
			out[t] = true
		}
	}
	return out, nil
}

// TestFuncs lists the top-level test functions declared in dir's
// _test.go files, sorted.
func TestFuncs(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var out []string
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil && isTest(fd) {
				out = append(out, fd.Name.Name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// isTest: func TestXxx(t *testing.T), as go test finds them.
func isTest(fd *ast.FuncDecl) bool {
	name := fd.Name.Name
	if !strings.HasPrefix(name, "Test") || name == "TestMain" {
		return false
	}
	if len(name) > 4 {
		if r := name[4]; r >= 'a' && r <= 'z' {
			return false
		}
	}
	p := fd.Type.Params.List
	if len(p) != 1 || len(p[0].Names) > 1 {
		return false
	}
	star, ok := p[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "T"
}
