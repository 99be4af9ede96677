package promotion

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/platform"
)

// APIVersion and Kind name a Pipeline object in git.
const (
	APIVersion = "fluxd.io/v1"
	Kind       = "Pipeline"
)

// Pipeline is the ordered stages one release moves through.
type Pipeline struct {
	Name      string
	Namespace string
	// File and Line are where the object starts in git.
	File string
	Line int
	// Stages are in the order they were written; a stage's From names an
	// earlier one, so the stages form a tree rooted at the first.
	Stages []Stage
}

// Stage is one environment of a pipeline.
type Stage struct {
	Name string
	// From is the stage whose verified bundles this one takes; empty
	// for the first stage, which takes new images as fluxd always has
	// (its services' automation, or a release by hand).
	From string
	// Services are the workloads the stage's bundle runs on.
	Services []platform.ID
	// Auto promotes the newest bundle verified in From by itself.
	Auto bool
	// Soak is how long a bundle must run in this stage, from the end of
	// its rollout and once its checks passed, before it is verified.
	Soak time.Duration
	// Approvals is how many different people (or CI, by a signed
	// webhook) must approve a bundle before it is promoted into this
	// stage. A bundle with all its approvals is promoted.
	Approvals int
	// Checks run once a bundle rolled out in this stage; each must pass
	// before the soak starts.
	Checks []Check
	// RollbackOnFailure puts the stage back on its last verified bundle,
	// as one commit, when a bundle fails a gate here.
	RollbackOnFailure bool
	// Line is where the stage is written.
	Line int
}

// Check is one gate a bundle passes after its rollout. Exactly one of
// HTTP, Job and Prometheus is set.
type Check struct {
	// Name names the check in states and history: given, or the kind
	// and its index ("http-0").
	Name       string
	HTTP       *HTTPCheck
	Job        *JobCheck
	Prometheus *PrometheusCheck
	Line       int
}

// HTTPCheck passes when a GET of URL answers 2xx within Timeout, trying
// up to Retries more times, Interval apart.
type HTTPCheck struct {
	URL      string
	Timeout  time.Duration
	Retries  int
	Interval time.Duration
}

// JobCheck runs a Kubernetes Job from Template (a Job's spec) in the
// stage's namespace; it passes when the Job succeeds within Timeout.
type JobCheck struct {
	// Template is the Job's spec, as written.
	Template map[string]any
	Timeout  time.Duration
}

// PrometheusCheck asks a Prometheus HTTP API (URL, e.g.
// http://prometheus:9090) for Query's value and compares it with
// Threshold by Op. A query that returns no sample fails: "no data" is
// not "healthy".
type PrometheusCheck struct {
	URL       string
	Query     string
	Op        string // one of <, <=, >, >=, ==, !=
	Threshold float64
	Timeout   time.Duration
}

// Check defaults, when a check does not say.
const (
	DefaultCheckTimeout  = 10 * time.Second
	DefaultCheckInterval = 5 * time.Second
	DefaultJobTimeout    = 10 * time.Minute
)

// Problem is one thing wrong with a Pipeline, where it is written.
type Problem struct {
	File string
	Line int
	Err  error
}

func (p Problem) Error() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %v", p.File, p.Line, p.Err)
	}
	return fmt.Sprintf("%s: %v", p.File, p.Err)
}

func (p Problem) Unwrap() error { return p.Err }

// Parse reads the Pipelines among the YAML documents of one file. Other
// objects are skipped. A Pipeline with a problem is left out, and each
// problem names the file and line; the others are returned, so one bad
// Pipeline does not stop the rest.
func Parse(file string, b []byte) ([]Pipeline, []Problem) {
	var out []Pipeline
	var problems []Problem
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// A YAML error ends the file: the decoder cannot resync.
			problems = append(problems, Problem{File: file, Err: fmt.Errorf("malformed YAML: %w", err)})
			break
		}
		if len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		if root.Kind != yaml.MappingNode {
			continue
		}
		apiVersion, kind := scalarAt(root, "apiVersion"), scalarAt(root, "kind")
		if kind != Kind || !strings.HasPrefix(apiVersion, "fluxd.io/") {
			continue
		}
		if apiVersion != APIVersion {
			problems = append(problems, Problem{File: file, Line: root.Line,
				Err: fmt.Errorf("Pipeline has apiVersion %q; fluxd reads %s", apiVersion, APIVersion)})
			continue
		}
		p, errs := parsePipeline(root)
		if len(errs) > 0 {
			for _, e := range errs {
				problems = append(problems, Problem{File: file, Line: e.line, Err: e.err})
			}
			continue
		}
		p.File, p.Line = file, root.Line
		out = append(out, p)
	}
	return out, problems
}

// lineErr is a problem found while reading one Pipeline.
type lineErr struct {
	line int
	err  error
}

// dnsLabel is what a stage's name must be: it is shown in IDs, URLs and
// the CLI's arguments.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// The raw shapes, decoded strictly so that a misspelt field is an error
// rather than a gate silently missing.
type rawMetadata struct {
	Name      string `yaml:"name"`
	Namespace string `yaml:"namespace"`
}

type rawStage struct {
	Name              string    `yaml:"name"`
	From              string    `yaml:"from"`
	Services          []string  `yaml:"services"`
	Auto              bool      `yaml:"auto"`
	Soak              string    `yaml:"soak"`
	Approvals         int       `yaml:"approvals"`
	Checks            yaml.Node `yaml:"checks"`
	RollbackOnFailure bool      `yaml:"rollbackOnFailure"`
}

type rawCheck struct {
	Name string `yaml:"name"`
	HTTP *struct {
		URL      string `yaml:"url"`
		Timeout  string `yaml:"timeout"`
		Retries  int    `yaml:"retries"`
		Interval string `yaml:"interval"`
	} `yaml:"http"`
	Job *struct {
		Template map[string]any `yaml:"template"`
		Timeout  string         `yaml:"timeout"`
	} `yaml:"job"`
	Prometheus *struct {
		URL       string   `yaml:"url"`
		Query     string   `yaml:"query"`
		Op        string   `yaml:"op"`
		Threshold *float64 `yaml:"threshold"`
		Timeout   string   `yaml:"timeout"`
	} `yaml:"prometheus"`
}

func parsePipeline(root *yaml.Node) (Pipeline, []lineErr) {
	var errs []lineErr
	bad := func(line int, format string, args ...any) {
		errs = append(errs, lineErr{line, fmt.Errorf(format, args...)})
	}
	var meta rawMetadata
	if m := valueAt(root, "metadata"); m == nil || m.Decode(&meta) != nil {
		bad(root.Line, "Pipeline has no metadata (a mapping with a name)")
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch k := root.Content[i]; k.Value {
		case "apiVersion", "kind", "metadata", "spec":
		default:
			bad(k.Line, "Pipeline has a field %s; it has apiVersion, kind, metadata and spec", k.Value)
		}
	}
	p := Pipeline{Name: meta.Name, Namespace: meta.Namespace}
	if p.Name == "" {
		bad(root.Line, "Pipeline has no metadata.name")
	}
	spec := valueAt(root, "spec")
	if spec != nil {
		var unused struct {
			Stages yaml.Node `yaml:"stages"`
		}
		e, _ := decodeStrict(spec, &unused, "spec", "stages")
		errs = append(errs, e...)
	}
	stages := items(valueAt(spec, "stages"))
	if len(stages) == 0 {
		bad(root.Line, "Pipeline %s has no spec.stages: name at least one stage, the first taking new images as fluxd releases them", p.Name)
	}
	seen := map[string]int{}     // stage name -> its index
	owner := map[string]string{} // service -> stage
	for i, n := range stages {
		var rs rawStage
		e, ok := decodeStrict(n, &rs, fmt.Sprintf("stage %d", i+1), "name", "from", "services", "auto", "soak", "approvals", "checks", "rollbackOnFailure")
		errs = append(errs, e...)
		if !ok {
			continue
		}
		s := Stage{Name: rs.Name, From: rs.From, Auto: rs.Auto, Approvals: rs.Approvals,
			RollbackOnFailure: rs.RollbackOnFailure, Line: n.Line}
		switch {
		case s.Name == "":
			bad(n.Line, "stage %d has no name", i+1)
		case !dnsLabel.MatchString(s.Name):
			bad(n.Line, "stage name %q is not a DNS label (lower-case letters, digits and '-', at most 63)", s.Name)
		case seen[s.Name] > 0:
			bad(n.Line, "stage %q is named twice", s.Name)
		}
		seen[s.Name] = i + 1
		if i == 0 && s.From != "" {
			bad(n.Line, "the first stage %q has from: %q; the first stage takes new images from releases and automation, not from a stage", s.Name, s.From)
		}
		if i > 0 {
			switch j, ok := seen[s.From]; {
			case s.From == "":
				bad(n.Line, "stage %q has no from: name the earlier stage whose verified bundles it takes", s.Name)
			case !ok || j == i+1:
				bad(n.Line, "stage %q takes from %q, which is not an earlier stage of this pipeline (stages: %s)", s.Name, s.From, strings.Join(names(stages[:i]), ", "))
			}
		}
		if len(rs.Services) == 0 {
			bad(n.Line, "stage %q names no services", s.Name)
		}
		for _, sv := range rs.Services {
			id, err := platform.ParseID(sv)
			if err != nil {
				bad(n.Line, "stage %q: %v", s.Name, err)
				continue
			}
			if o, ok := owner[id.String()]; ok {
				bad(n.Line, "service %s is in stages %q and %q; a service belongs to one stage", id, o, s.Name)
				continue
			}
			owner[id.String()] = s.Name
			s.Services = append(s.Services, id)
		}
		if rs.Soak != "" {
			d, err := time.ParseDuration(rs.Soak)
			if err != nil || d < 0 {
				bad(n.Line, "stage %q: soak %q is not a duration (e.g. 30m, 1h, 5s)", s.Name, rs.Soak)
			}
			s.Soak = d
		}
		if s.Approvals < 0 {
			bad(n.Line, "stage %q: approvals is %d; it counts people, 0 or more", s.Name, s.Approvals)
		}
		if i == 0 && (s.Auto || s.Approvals > 0) {
			bad(n.Line, "the first stage %q sets auto or approvals, which gate promotion into a stage; the first stage takes releases as they come (use fluxd.io/automated on its services)", s.Name)
		}
		for k, cn := range items(valueAt(n, "checks")) {
			c, cerrs := parseCheck(cn, k)
			for _, e := range cerrs {
				errs = append(errs, lineErr{e.line, fmt.Errorf("stage %q: %w", s.Name, e.err)})
			}
			s.Checks = append(s.Checks, c)
		}
		p.Stages = append(p.Stages, s)
	}
	return p, errs
}

func parseCheck(n *yaml.Node, k int) (Check, []lineErr) {
	var rc rawCheck
	errs, ok := decodeStrict(n, &rc, fmt.Sprintf("check %d", k+1), "name", "http", "job", "prometheus")
	if !ok {
		return Check{}, errs
	}
	bad := func(format string, args ...any) {
		errs = append(errs, lineErr{n.Line, fmt.Errorf(format, args...)})
	}
	dur := func(field, s string, def time.Duration) time.Duration {
		if s == "" {
			return def
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			bad("check %d: %s %q is not a positive duration", k+1, field, s)
			return def
		}
		return d
	}
	for _, kk := range []struct {
		kind  string
		known []string
	}{{"http", []string{"url", "timeout", "retries", "interval"}}, {"job", []string{"template", "timeout"}},
		{"prometheus", []string{"url", "query", "op", "threshold", "timeout"}}} {
		kn := valueAt(n, kk.kind)
		if kn == nil || kn.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(kn.Content); i += 2 {
			if key := kn.Content[i]; !slices.Contains(kk.known, key.Value) {
				errs = append(errs, lineErr{key.Line, fmt.Errorf("check %d: %s has no field %s (known: %s)", k+1, kk.kind, key.Value, strings.Join(kk.known, ", "))})
			}
		}
	}
	c := Check{Name: rc.Name, Line: n.Line}
	kinds := 0
	if rc.HTTP != nil {
		kinds++
		u, err := url.Parse(rc.HTTP.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("check %d: http url %q is not an http:// or https:// URL", k+1, rc.HTTP.URL)
		}
		if rc.HTTP.Retries < 0 {
			bad("check %d: retries is %d; 0 or more", k+1, rc.HTTP.Retries)
		}
		c.HTTP = &HTTPCheck{URL: rc.HTTP.URL, Retries: rc.HTTP.Retries,
			Timeout:  dur("timeout", rc.HTTP.Timeout, DefaultCheckTimeout),
			Interval: dur("interval", rc.HTTP.Interval, DefaultCheckInterval)}
		c.Name = defaultName(c.Name, "http", k)
	}
	if rc.Job != nil {
		kinds++
		if len(rc.Job.Template) == 0 {
			bad("check %d: job has no template: give the Job's spec (template.spec.containers, restartPolicy: Never)", k+1)
		}
		c.Job = &JobCheck{Template: rc.Job.Template, Timeout: dur("timeout", rc.Job.Timeout, DefaultJobTimeout)}
		c.Name = defaultName(c.Name, "job", k)
	}
	if rc.Prometheus != nil {
		kinds++
		pc := rc.Prometheus
		u, err := url.Parse(pc.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("check %d: prometheus url %q is not an http:// or https:// URL (the server's base, e.g. http://prometheus:9090)", k+1, pc.URL)
		}
		if pc.Query == "" {
			bad("check %d: prometheus has no query", k+1)
		}
		switch pc.Op {
		case "<", "<=", ">", ">=", "==", "!=":
		default:
			bad("check %d: prometheus op %q is not one of <, <=, >, >=, ==, !=", k+1, pc.Op)
		}
		if pc.Threshold == nil {
			bad("check %d: prometheus has no threshold", k+1)
		}
		c.Prometheus = &PrometheusCheck{URL: pc.URL, Query: pc.Query, Op: pc.Op, Timeout: dur("timeout", pc.Timeout, DefaultCheckTimeout)}
		if pc.Threshold != nil {
			c.Prometheus.Threshold = *pc.Threshold
		}
		c.Name = defaultName(c.Name, "prometheus", k)
	}
	if kinds != 1 {
		bad("check %d has %d of http, job and prometheus; give exactly one", k+1, kinds)
	}
	return c, errs
}

func defaultName(name, kind string, k int) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("%s-%d", kind, k)
}

// decodeStrict decodes n into v, and names each key v does not know at
// its own line, so that a misspelt gate is an error rather than a gate
// silently missing; the rest is still read, so every problem of a
// Pipeline shows at once. ok is false when n could not be decoded at
// all. (yaml.v3 checks unknown fields only in a Decoder over bytes,
// whose lines would be those of a re-encoding.)
func decodeStrict(n *yaml.Node, v any, what string, known ...string) (errs []lineErr, ok bool) {
	if n.Kind != yaml.MappingNode {
		return []lineErr{{n.Line, fmt.Errorf("%s is a %s, not a mapping", what, kindName(n.Kind))}}, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !slices.Contains(known, k.Value) {
			errs = append(errs, lineErr{k.Line, fmt.Errorf("%s has no field %s (known: %s)", what, k.Value, strings.Join(known, ", "))})
		}
	}
	if err := n.Decode(v); err != nil {
		msg := strings.TrimPrefix(strings.ReplaceAll(err.Error(), "yaml: unmarshal errors:\n  ", ""), "yaml: ")
		return append(errs, lineErr{n.Line, fmt.Errorf("%s: %s", what, msg)}), false
	}
	return errs, true
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "scalar"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}

// valueAt returns the node under key in a mapping, or nil.
func valueAt(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// items returns a sequence's items, or nil.
func items(n *yaml.Node) []*yaml.Node {
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

func scalarAt(m *yaml.Node, key string) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key && m.Content[i+1].Kind == yaml.ScalarNode {
			return m.Content[i+1].Value
		}
	}
	return ""
}

func names(stages []*yaml.Node) []string {
	var out []string
	for _, st := range stages {
		if n := scalarAt(st, "name"); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Stage returns the stage named name.
func (p Pipeline) Stage(name string) (Stage, bool) {
	for _, s := range p.Stages {
		if s.Name == name {
			return s, true
		}
	}
	return Stage{}, false
}

// CheckAll finds what is wrong across Pipelines: a service in two
// pipelines, or two pipelines of one name in one namespace. Each
// pipeline on its own was checked by Parse.
func CheckAll(ps []Pipeline) []Problem {
	var problems []Problem
	byName := map[string]Pipeline{}
	owner := map[platform.ID]Pipeline{}
	for _, p := range ps {
		key := p.Namespace + "/" + p.Name
		if o, ok := byName[key]; ok {
			problems = append(problems, Problem{File: p.File, Line: p.Line,
				Err: fmt.Errorf("Pipeline %s is also defined at %s:%d", key, o.File, o.Line)})
			continue
		}
		byName[key] = p
		for _, s := range p.Stages {
			for _, id := range s.Services {
				if o, ok := owner[id]; ok {
					problems = append(problems, Problem{File: p.File, Line: s.Line,
						Err: fmt.Errorf("service %s is in Pipeline %s and in Pipeline %s/%s (%s:%d); a service belongs to one pipeline", id, key, o.Namespace, o.Name, o.File, o.Line)})
					continue
				}
				owner[id] = p
			}
		}
	}
	return problems
}
