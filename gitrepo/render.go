package gitrepo

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"github.com/fluxd/fluxd/helmrelease"
	"github.com/fluxd/fluxd/platform"
)

// The one check every commit fluxd pushes passes: render everything git
// holds under the manifest paths (plain files, typed lists, kustomize
// builds) at the parent commit and at the new one, and compare. The only
// difference allowed is the planned changes, (workload, container, from →
// to) or (workload, annotation, from → to): nothing else moved, nothing
// planned is missing. It does not matter which edit made a difference (a
// kustomize images: entry other workloads share, a YAML anchor, a bug in
// the byte editor): what would reach the cluster is what is compared.

// Change is one planned change of a workload in git: its container's
// image, or one of its annotations ("" for an absent one), From → To.
type Change struct {
	Workload   platform.ID
	Container  string
	Annotation string
	From, To   string
	// File, Line and Field name a field of the object that starts at
	// File:Line (a field a $imagepolicy marker marks), for a change that
	// is not a workload's container or annotation. With no Line, File is
	// a kustomization file and the field is of what it builds from an
	// object of kind Kind in one of its bases: named Name exactly when
	// ExactName is set (the base object's name with the namePrefix and
	// nameSuffix of every kustomization on the way, Setter.BuiltNames),
	// else any name containing Name; every such object holding From at
	// Field changes.
	File      string
	Line      int
	Field     []any
	Kind      string
	Name      string
	ExactName bool
}

func (c Change) String() string {
	if c.Field != nil && c.Line == 0 && c.ExactName {
		return fmt.Sprintf("%s builds %s/%s %s: %q -> %q", c.File, c.Kind, c.Name, pathString(c.Field), c.From, c.To)
	}
	if c.Field != nil && c.Line == 0 {
		return fmt.Sprintf("%s builds %s/*%s* %s: %q -> %q", c.File, c.Kind, c.Name, pathString(c.Field), c.From, c.To)
	}
	if c.Field != nil {
		return fmt.Sprintf("%s:%d %s: %q -> %q", c.File, c.Line, pathString(c.Field), c.From, c.To)
	}
	if c.Annotation != "" {
		return fmt.Sprintf("%s annotation %s: %q -> %q", c.Workload, c.Annotation, c.From, c.To)
	}
	return fmt.Sprintf("%s container %s: %s -> %s", c.Workload, c.Container, c.From, c.To)
}

// Render reads every object under dirs as the sync reads them
// (ReadObjects), twice: as the clone holds them (before, the parent
// commit), and with the files of overlay (paths relative to root) in
// place of the clone's (after, the commit of those files). Files the
// overlay leaves alone are read once.
func Render(root string, dirs []string, overlay map[string][]byte) (before, after *Objects, err error) {
	if overlay == nil {
		overlay = map[string][]byte{}
	}
	return readObjects(root, dirs, overlay)
}

// RenderError is a commit refused because its render differs from its
// parent's by more, or other, than the planned changes.
type RenderError struct {
	// Moved names the objects that would change unplanned, or not as
	// planned ("Deployment/default/web").
	Moved []string
	// Details say how, one line each.
	Details []string
}

func (e *RenderError) Error() string {
	return fmt.Sprintf("the commit would change more than the plan, or not as planned (%s): %s; nothing was pushed",
		strings.Join(e.Moved, ", "), strings.Join(e.Details, "; "))
}

// CheckRender compares the render at a parent commit (before) with the
// render at the new commit (after): after must be before with exactly
// changes made. A change whose From is not what before holds, an object
// that appears, disappears or differs anywhere else, or a planned change
// missing from after, is a *RenderError naming the objects.
func CheckRender(before, after *Objects, changes []Change) error {
	want := index(before)
	got := index(after)
	moved := map[string]bool{}
	var details []string
	fail := func(key, format string, args ...any) {
		moved[key] = true
		details = append(details, key+": "+fmt.Sprintf(format, args...))
	}
	// The planned changes, made to a copy of the parent's render.
	byID := map[platform.ID][]string{}
	for key, o := range want {
		if id, ok := workloadOf(o.Manifest); ok {
			byID[id] = append(byID[id], key)
		}
	}
	for k := range byID {
		sort.Strings(byID[k])
	}
	copies := map[string]map[string]any{}
	for _, c := range changes {
		keys := byID[c.Workload]
		switch {
		case c.Field != nil && c.Line == 0:
			keys = builtFrom(want, c)
			if len(keys) == 0 {
				continue // an overlay that sets the field its own way: it does not move
			}
		case c.Field != nil:
			keys = objectsAt(want, c.File, c.Line)
		}
		if len(keys) == 0 {
			fail(c.Workload.String(), "planned (%s), but git does not render it at the parent commit", c)
			continue
		}
		for _, key := range keys {
			obj, ok := copies[key]
			if !ok {
				obj, _ = deepCopy(want[key].Manifest).(map[string]any)
				copies[key] = obj
			}
			if err := apply(obj, c); err != nil {
				fail(key, "%v", err)
			}
		}
	}
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	for _, key := range sortedKeys(keys) {
		w, inBefore := want[key]
		g, inAfter := got[key]
		switch {
		case moved[key]:
		case !inAfter:
			fail(key, "would no longer be rendered (from %s)", w.Where())
		case !inBefore:
			fail(key, "would newly be rendered (from %s)", g.Where())
		default:
			wm := w.Manifest
			if c, ok := copies[key]; ok {
				wm = c
			}
			if path, a, b, same := diffAt(wm, g.Manifest, ""); !same {
				fail(key, "%s would be %s, not %s", strings.TrimPrefix(path, "."), show(b), show(a))
			}
		}
	}
	if len(moved) == 0 {
		return nil
	}
	if n := newProblems(before, after); n != "" {
		details = append(details, "the new commit does not render: "+n)
	}
	return &RenderError{Moved: sortedKeys(moved), Details: details}
}

// index keys objects by group, kind, namespace and name ("#2" for the
// second of the same key: a workload defined twice is compared in order).
func index(objs *Objects) map[string]platform.Object {
	out := map[string]platform.Object{}
	if objs == nil {
		return out
	}
	for _, o := range objs.Objects {
		r := o.Ref()
		group, _, _ := strings.Cut(r.APIVersion, "/")
		if !strings.Contains(r.APIVersion, "/") {
			group = ""
		}
		ns := r.Namespace
		if ns == "" && isWorkloadKind(r.Kind) {
			ns = "default"
		}
		key := r.Kind + "/" + ns + "/" + r.Name
		if group != "" && group != "apps" && group != "batch" {
			key = r.Kind + "." + group + "/" + ns + "/" + r.Name
		}
		k := key
		for n := 2; ; n++ {
			if _, dup := out[k]; !dup {
				break
			}
			k = fmt.Sprintf("%s#%d", key, n)
		}
		out[k] = o
	}
	return out
}

func isWorkloadKind(kind string) bool {
	switch strings.ToLower(kind) {
	case "deployment", "statefulset", "daemonset", "cronjob", platform.KindHelmRelease, "imagepolicy":
		return true
	}
	return false
}

// workloadOf is the workload ID of a rendered object, as FindWorkloads
// names it (namespace "default" when it sets none).
func workloadOf(m map[string]any) (platform.ID, bool) {
	kind, _ := m["kind"].(string)
	apiVersion, _ := m["apiVersion"].(string)
	if !isWorkloadKind(kind) || strings.EqualFold(kind, platform.KindHelmRelease) && !helmrelease.IsHelmRelease(apiVersion, kind) {
		return platform.ID{}, false
	}
	md, _ := m["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if name == "" {
		return platform.ID{}, false
	}
	if ns == "" {
		ns = "default"
	}
	return platform.ID{Namespace: ns, Kind: strings.ToLower(kind), Name: name}, true
}

// apply makes change c to the rendered workload obj, after checking that
// it holds c.From.
func apply(obj map[string]any, c Change) error {
	if c.Field != nil {
		return applyField(obj, c)
	}
	if c.Annotation != "" {
		md, _ := obj["metadata"].(map[string]any)
		if md == nil {
			md = map[string]any{}
			obj["metadata"] = md
		}
		ann, _ := md["annotations"].(map[string]any)
		cur := ""
		if v, ok := ann[c.Annotation]; ok && v != nil {
			cur = fmt.Sprint(v) // an unquoted true reads as a bool
		}
		if cur != c.From {
			return fmt.Errorf("annotation %s is %q at the parent commit, not %q as planned", c.Annotation, cur, c.From)
		}
		if c.To == "" {
			delete(ann, c.Annotation)
			if len(ann) == 0 {
				delete(md, "annotations")
			}
			return nil
		}
		if ann == nil {
			ann = map[string]any{}
			md["annotations"] = ann
		}
		ann[c.Annotation] = c.To
		return nil
	}
	if KindFormat(c.Workload.Kind) == FormatHelm {
		return applyHelm(obj, c)
	}
	path := []string{"spec", "template", "spec"}
	if c.Workload.Kind == "cronjob" {
		path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	var pod any = obj
	for _, k := range path {
		pod = get(pod, k)
	}
	found := false
	for _, key := range []string{"initContainers", "containers"} {
		list, _ := get(pod, key).([]any)
		for _, ct := range list {
			ct, ok := ct.(map[string]any)
			if !ok || ct["name"] != c.Container {
				continue
			}
			found = true
			if cur, _ := ct["image"].(string); cur != c.From {
				return fmt.Errorf("container %s runs %s at the parent commit, not %s as planned", c.Container, cur, c.From)
			}
			ct["image"] = c.To
		}
	}
	if !found {
		return fmt.Errorf("has no container %s at the parent commit, although the plan changes it", c.Container)
	}
	return nil
}

// diffAt compares two decoded values; when they differ, it says where
// and the two values there.
func diffAt(a, b any, path string) (string, any, any, bool) {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok {
			return path, a, b, false
		}
		keys := map[string]bool{}
		for k := range a {
			keys[k] = true
		}
		for k := range b {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			av, inA := a[k]
			bv, inB := b[k]
			if !inA || !inB {
				// An empty mapping and none are one to the API server
				// (an unlock that removes the last annotation may leave
				// "annotations: {}" in the file).
				if emptyMap(av) && emptyMap(bv) {
					continue
				}
				return path + "." + k, av, bv, false
			}
			if p, x, y, same := diffAt(av, bv, path+"."+k); !same {
				return p, x, y, false
			}
		}
		return "", nil, nil, true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return path, a, b, false
		}
		for i := range a {
			if p, x, y, same := diffAt(a[i], b[i], fmt.Sprintf("%s[%d]", path, i)); !same {
				return p, x, y, false
			}
		}
		return "", nil, nil, true
	case float64:
		if b, ok := b.(float64); ok && math.IsNaN(a) && math.IsNaN(b) {
			return "", nil, nil, true
		}
	}
	if !reflect.DeepEqual(a, b) {
		return path, a, b, false
	}
	return "", nil, nil, true
}

// show writes a value for an error message, shortened.
func show(v any) string {
	if v == nil {
		return "absent"
	}
	s := fmt.Sprint(v)
	if _, ok := v.(string); ok {
		s = fmt.Sprintf("%q", v)
	}
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = deepCopy(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = deepCopy(x)
		}
		return out
	}
	return v
}

// newProblems are the render problems of after that before did not have.
func newProblems(before, after *Objects) string {
	had := map[string]bool{}
	for _, p := range before.Problems {
		had[p.Error()] = true
	}
	var out []string
	for _, p := range after.Problems {
		if !had[p.Error()] {
			out = append(out, p.Error())
		}
	}
	return strings.Join(out, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// IsRenderError reports whether err is a refused render.
func IsRenderError(err error) bool {
	var re *RenderError
	return errors.As(err, &re)
}

// emptyMap says whether v is absent, null or a mapping with no keys.
func emptyMap(v any) bool {
	if v == nil {
		return true
	}
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

// objectsAt are the keys of the objects that start at file:line.
func objectsAt(objs map[string]platform.Object, file string, line int) []string {
	var out []string
	for k, o := range objs {
		if o.File == file && o.Line == line {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// applyField makes a change of one field (c.Field) to the rendered object
// obj, after checking that it holds c.From where it holds a string.
func applyField(obj map[string]any, c Change) error {
	var cur any = obj
	for i, p := range c.Field {
		last := i == len(c.Field)-1
		switch p := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return fmt.Errorf("has no field %s at the parent commit, although the plan changes it", pathString(c.Field))
			}
			v, ok := m[p]
			if !ok {
				return fmt.Errorf("has no field %s at the parent commit, although the plan changes it", pathString(c.Field))
			}
			if last {
				if s, isString := v.(string); isString && s != c.From {
					return fmt.Errorf("field %s is %q at the parent commit, not %q as planned", pathString(c.Field), s, c.From)
				}
				m[p] = c.To
				return nil
			}
			cur = v
		case int:
			l, ok := cur.([]any)
			if !ok || p >= len(l) {
				return fmt.Errorf("has no field %s at the parent commit, although the plan changes it", pathString(c.Field))
			}
			if last {
				if s, isString := l[p].(string); isString && s != c.From {
					return fmt.Errorf("field %s is %q at the parent commit, not %q as planned", pathString(c.Field), s, c.From)
				}
				l[p] = c.To
				return nil
			}
			cur = l[p]
		}
	}
	return fmt.Errorf("an empty field path")
}

// builtFrom are the keys of the objects kustomization file c.File builds
// that change c may move: of kind c.Kind, named c.Name (exactly, or
// containing it where the build's names are unknown), holding c.From at
// c.Field.
func builtFrom(objs map[string]platform.Object, c Change) []string {
	var out []string
	for k, o := range objs {
		r := o.Ref()
		if o.File != c.File || o.Line != 0 || r.Kind != c.Kind || c.ExactName && r.Name != c.Name || !c.ExactName && !strings.Contains(r.Name, c.Name) {
			continue
		}
		var cur any = o.Manifest
		for _, p := range c.Field {
			switch p := p.(type) {
			case string:
				m, _ := cur.(map[string]any)
				cur = m[p]
			case int:
				l, _ := cur.([]any)
				if p >= len(l) {
					cur = nil
					break
				}
				cur = l[p]
			}
		}
		if s, ok := cur.(string); ok && s == c.From {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}
