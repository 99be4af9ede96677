// Command e2eshard runs a compiled end-to-end test binary as several
// processes side by side, each on a stack of its own, and reports each as
// go test reports a package: a failed test's output, then "ok" or "FAIL"
// with the shard's time. make test runs it (docs/development.md, "How the
// end-to-end tests are sharded").
//
// The tests are dealt out longest first, each to the shard expected to end
// first, by the times in a durations table (e2e/testdata/durations.tsv); a
// test missing from it counts DefaultSeconds. The tests that need the real
// node all run in shard 1, the only shard that starts one. Every test the
// binary lists runs in exactly one shard.
//
// It writes each test's time to -measured (the table's format) and each
// shard's go test -json stream beside it, and exits 1 when a shard fails.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

func main() {
	var (
		bin       = flag.String("bin", "", "the compiled test binary (go test -c)")
		dir       = flag.String("dir", "e2e", "the package's directory: the shards' working directory, and the sources read for real-node tests")
		pkg       = flag.String("pkg", "github.com/fluxd/fluxd/e2e", "the package's import path, for the ok/FAIL lines")
		n         = flag.Int("shards", 3, "how many processes")
		durations = flag.String("durations", "e2e/testdata/durations.tsv", "the table of the tests' last times")
		measured  = flag.String("measured", ".bin/e2e-durations.tsv", "where to write this run's times")
		timeout   = flag.Duration("timeout", 75*time.Minute, "each shard's -test.timeout")
		fluxdBin  = flag.String("fluxd-bin", "", "a directory with fluxd and fluxctl built from this tree, shared by the shards (FLUXD_E2E_BIN); empty: each shard builds its own")
		list      = flag.Bool("list", false, "print the shards and exit")
		fromJSON  = flag.String("from-json", "", "write -measured from this go test -json stream of the package (a run of go test -json ./e2e) instead of running anything")
	)
	flag.Parse()
	if *fromJSON != "" {
		if err := tableFromJSON(*fromJSON, *measured); err != nil {
			fmt.Fprintln(os.Stderr, "e2eshard:", err)
			os.Exit(1)
		}
		return
	}
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "e2eshard: -bin is required: the end-to-end test binary, from go test -c -o .bin/e2e.test ./e2e")
		os.Exit(2)
	}
	if err := run(*bin, *dir, *pkg, *n, *durations, *measured, *timeout, *fluxdBin, *list); err != nil {
		fmt.Fprintln(os.Stderr, "e2eshard:", err)
		os.Exit(1)
	}
}

func run(bin, dir, pkg string, n int, durationsPath, measuredPath string, timeout time.Duration, fluxdBin string, list bool) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	tests, err := listTests(bin, dir)
	if err != nil {
		return err
	}
	d, err := ReadDurations(durationsPath)
	if err != nil {
		return err
	}
	real, err := RealNodeTests(dir)
	if err != nil {
		return err
	}
	shards := Partition(tests, n, d, real)
	if err := checkEveryTestOnce(tests, shards); err != nil {
		return err
	}
	if list {
		for i, s := range shards {
			fmt.Printf("shard %d/%d: %d tests, ~%.0fs, real node %v\n  %s\n", i+1, len(shards), len(s.Tests), s.Seconds, s.RealNode, strings.Join(s.Tests, " "))
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(measuredPath), 0o755); err != nil {
		return err
	}
	out := &printer{}
	results := make([]shardResult, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		if len(s.Tests) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runShard(out, bin, dir, pkg, i, len(shards), s, timeout, fluxdBin, measuredPath)
		}()
	}
	wg.Wait()
	all := Durations{}
	failed := false
	for _, r := range results {
		for t, s := range r.times {
			all[t] = s
		}
		failed = failed || r.failed
	}
	if err := writeTable(measuredPath, all); err != nil {
		return err
	}
	if failed {
		return fmt.Errorf("a shard failed (above); each shard's go test -json stream is in %s", filepath.Dir(measuredPath))
	}
	return nil
}

// listTests asks the binary for its tests (the e2e TestMain starts no
// stack for -test.list).
func listTests(bin, dir string) ([]string, error) {
	cmd := exec.Command(bin, "-test.list", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the tests (%s -test.list .): %v\n%s", bin, err, stderr.Bytes())
	}
	var tests []string
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		// Benchmarks run only under -test.bench; tests, examples and fuzz
		// targets' seeds run under go test.
		if l == "" || strings.HasPrefix(l, "Benchmark") || l == "ok" || strings.HasPrefix(l, "ok ") {
			continue
		}
		tests = append(tests, l)
	}
	if len(tests) == 0 {
		return nil, fmt.Errorf("%s -test.list . listed no tests", bin)
	}
	return tests, nil
}

// checkEveryTestOnce is the partition's promise, checked on every run.
func checkEveryTestOnce(tests []string, shards []Shard) error {
	count := map[string]int{}
	for _, s := range shards {
		for _, t := range s.Tests {
			count[t]++
		}
	}
	var bad []string
	for _, t := range tests {
		if count[t] != 1 {
			bad = append(bad, fmt.Sprintf("%s in %d shards", t, count[t]))
		}
		delete(count, t)
	}
	for t := range count {
		bad = append(bad, t+" is not a test of the binary")
	}
	if len(bad) > 0 {
		return fmt.Errorf("the shards do not hold every test exactly once: %s", strings.Join(bad, "; "))
	}
	return nil
}

type shardResult struct {
	failed bool
	times  map[string]float64
}

// event is one line of go test -json.
type event struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

// runShard runs one shard under go tool test2json and prints what go test
// prints without -v: the output of the tests that fail, the lines no test
// wrote (TestMain's), and ok/FAIL with the time.
func runShard(out *printer, bin, dir, pkg string, i, n int, s Shard, timeout time.Duration, fluxdBin, measuredPath string) shardResult {
	name := fmt.Sprintf("%s[%d/%d]", pkg, i+1, n)
	tag := fmt.Sprintf("[%d/%d] ", i+1, n)
	res := shardResult{times: map[string]float64{}}
	start := time.Now()
	jsonPath := strings.TrimSuffix(measuredPath, ".tsv") + fmt.Sprintf("-shard%d.json", i+1)
	jf, err := os.Create(jsonPath)
	if err != nil {
		out.block(fmt.Sprintf("%s: %v\nFAIL\t%s\t0.000s\n", name, err, name))
		res.failed = true
		return res
	}
	defer jf.Close()
	cmd := exec.Command("go", "tool", "test2json", "-t", "-p", pkg, bin,
		"-test.v=test2json", "-test.paniconexit0", "-test.count=1",
		"-test.timeout="+timeout.String(), "-test.run="+RunPattern(s.Tests))
	cmd.Dir = dir
	cmd.Env = os.Environ()
	if !s.RealNode {
		// One real node per machine: only the shard with its tests starts one.
		cmd.Env = append(cmd.Env, "FLUXD_STACK_REAL_NODE=0")
	}
	if fluxdBin != "" {
		cmd.Env = append(cmd.Env, "FLUXD_E2E_BIN="+fluxdBin)
	}
	cmd.Stderr = os.Stderr
	pipe, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		out.block(fmt.Sprintf("%s: starting the shard: %v\nFAIL\t%s\t0.000s\n", name, err, name))
		res.failed = true
		return res
	}
	out.block(fmt.Sprintf("%s: %d tests (~%.0fs by the table)%s\n", name, len(s.Tests), s.Seconds, map[bool]string{true: ", with the real node", false: ""}[s.RealNode]))
	buf := map[string]*strings.Builder{} // a running top-level test's output
	top := func(t string) string { tt, _, _ := strings.Cut(t, "/"); return tt }
	sc := bufio.NewScanner(pipe)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		jf.Write(line)
		jf.Write([]byte{'\n'})
		var e event
		if json.Unmarshal(line, &e) != nil {
			out.block(string(line) + "\n")
			continue
		}
		switch {
		case e.Test == "" && e.Action == "output":
			if o := e.Output; o != "PASS\n" && o != "FAIL\n" && !strings.HasPrefix(o, "=== ") {
				out.block(tag + o) // TestMain's: the stack's start and stop
			}
		case e.Test == "":
		case e.Action == "output":
			b := buf[top(e.Test)]
			if b == nil {
				b = &strings.Builder{}
				buf[top(e.Test)] = b
			}
			b.WriteString(e.Output)
		case e.Test != top(e.Test):
		case e.Action == "pass" || e.Action == "skip":
			res.times[e.Test] = e.Elapsed
			delete(buf, e.Test)
		case e.Action == "fail":
			res.times[e.Test] = e.Elapsed
			if b := buf[e.Test]; b != nil {
				out.block(b.String())
			}
			delete(buf, e.Test)
		}
	}
	err = cmd.Wait()
	// A test still running when the binary died (a timeout's panic, a
	// crash): its output so far says where.
	for t, b := range buf {
		out.block(fmt.Sprintf("(%s had not finished when the shard ended)\n%s", t, b.String()))
	}
	secs := time.Since(start).Seconds()
	if err != nil {
		res.failed = true
		out.block(fmt.Sprintf("FAIL\t%s\t%.3fs\n", name, secs))
	} else {
		out.block(fmt.Sprintf("ok  \t%s\t%.3fs\n", name, secs))
	}
	return res
}

// printer keeps the shards' blocks of output whole.
type printer struct{ mu sync.Mutex }

func (p *printer) block(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	os.Stdout.WriteString(s)
}

func writeTable(path string, d Durations) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := WriteDurations(f, d); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tableFromJSON keeps each top-level test's time from a go test -json
// stream.
func tableFromJSON(jsonPath, tablePath string) error {
	f, err := os.Open(jsonPath)
	if err != nil {
		return err
	}
	defer f.Close()
	d := Durations{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Test == "" || strings.Contains(e.Test, "/") {
			continue
		}
		if e.Action == "pass" || e.Action == "fail" || e.Action == "skip" {
			d[e.Test] = e.Elapsed
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(d) == 0 {
		return fmt.Errorf("%s holds no test's result: want the output of go test -json", jsonPath)
	}
	return writeTable(tablePath, d)
}
