package gitrepo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/gitrepo/format/yamledit"
	"github.com/fluxd/fluxd/platform"
)

// Setter markers: a YAML field written with a line comment
//
//	image: ghcr.io/org/app:1.2.3 # {"$imagepolicy": "flux-system:app"}
//	newTag: 1.2.3 # {"$imagepolicy": "flux-system:app:tag"}
//
// is set by the named ImagePolicy, as Flux v2's image-automation-controller
// sets it: the whole image, or its :tag, :name or :digest part. Only the
// value's bytes change; the comment stays byte for byte.
//
// A field is named by its file, its object (Kind/namespace/name; a
// List's item by itself, so that twins in two namespaces and items of one
// List are fields of their own) and its path. Markers are read in every
// document, in the items of kind: List and typed lists, in a
// kustomization's fields and in its inline patches (a YAML string whose
// lines, in a literal block, are the file's own, so they are edited in
// place too).

// SetterForm is which part of an image a marked field holds.
type SetterForm string

// The forms of a marker: "NS:NAME" is the whole image.
const (
	FormImage  SetterForm = ""
	FormTag    SetterForm = "tag"
	FormName   SetterForm = "name"
	FormDigest SetterForm = "digest"
)

// Setter is one field marked with a $imagepolicy comment.
type Setter struct {
	// Field names it: file, object, and the path to it
	// ("apps/app.yaml:ConfigMap/default/app:data.TAG"); it is the field's name in
	// list-services and in a plan.
	Field string
	File  string
	Line  int
	// Policy is the ImagePolicy the marker names, Form what the field
	// holds of its image.
	Policy NSName
	Form   SetterForm
	// Value is the field's value as git holds it.
	Value string
	// Path locates the field in its document (in an inline patch, in
	// the patch's document); doc is the document's index in the file.
	// ObjectLine is where the field's object starts (a List's item, not
	// the List, as Render names objects), ObjectPath the field's path
	// below it.
	Path       []any
	ObjectPath []any
	ObjectLine int
	doc        int
	// ObjectKind and ObjectName are the kind and metadata.name of the
	// field's object ("" for a document that is none).
	ObjectKind, ObjectName string
	// Patch is set for a field in a kustomization's inline patch: the
	// path of the patch string in the kustomization; patchDoc is the
	// document of the patch that holds the field.
	Patch    []any
	patchDoc int
	// Builds are the kustomization files fluxd builds (under
	// --git-path) whose build reads the field's file: its own
	// kustomization, and the overlays built from it as a base. The
	// field moves what they build, not an object of the file.
	Builds []string
	// builtNames are, by build (a file of Builds), the names that build
	// gives the object holding the field, where fluxd can tell them
	// (BuiltNames).
	builtNames map[string][]string
	// Namespace is the namespace of the object holding the field, as
	// the sync applies it ("default" when it names none); "" in a
	// kustomization file, whose built workloads are where it lands.
	// A scoped instance may release the field only when it holds it.
	Namespace string
}

// ImageAutomation is the Flux v2 image automation a repository holds.
type ImageAutomation struct {
	Repositories []ImageRepository
	Policies     []ImagePolicy
	Automations  []ImageUpdateAutomation
	Setters      []Setter
	// Warnings say what fluxd skipped or does not honour, with where.
	Warnings []string
	// kustomized are the directories (relative) fluxd builds with
	// kustomize, whose files reach the cluster only through a build.
	kustomized map[string]bool
}

// ParseSetterComment reads a $imagepolicy marker from a line comment
// ("# {"$imagepolicy": "NS:NAME[:tag|:name|:digest]"}"); ok is false for
// any other comment.
func ParseSetterComment(comment string) (policy NSName, form SetterForm, ok bool, err error) {
	c := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(comment), "#"))
	if !strings.HasPrefix(c, "{") || !strings.Contains(c, "$imagepolicy") {
		return NSName{}, "", false, nil
	}
	var m map[string]any
	if jerr := json.Unmarshal([]byte(c), &m); jerr != nil {
		return NSName{}, "", true, fmt.Errorf("the $imagepolicy marker %s is not a JSON object (%v); write it as # {\"$imagepolicy\": \"NAMESPACE:POLICY\"}", c, jerr)
	}
	v, has := m["$imagepolicy"]
	if !has {
		return NSName{}, "", false, nil
	}
	s, _ := v.(string)
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return NSName{}, "", true, fmt.Errorf("the $imagepolicy marker names %q; write NAMESPACE:POLICY, optionally followed by :tag, :name or :digest", s)
	}
	policy = NSName{Namespace: parts[0], Name: parts[1]}
	if len(parts) == 3 {
		switch f := SetterForm(parts[2]); f {
		case FormTag, FormName, FormDigest:
			form = f
		default:
			return NSName{}, "", true, fmt.Errorf("the $imagepolicy marker %q ends in %q; the forms are :tag, :name and :digest", s, parts[2])
		}
	}
	return policy, form, true, nil
}

// FindImageAutomation reads the Flux v2 image automation objects and the
// setter markers in every YAML file (kustomization files included) under
// dirs (absolute, inside root). Files that do not parse are left to
// FindWorkloads to report.
func FindImageAutomation(root string, dirs []string) (*ImageAutomation, error) {
	a := &ImageAutomation{}
	seen := map[string]bool{}
	for _, dir := range dirs {
		if err := a.readDir(root, dir, seen); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// readDir adds the objects and markers of the YAML files under dir
// (absolute, inside root) that seen does not hold.
func (a *ImageAutomation) readDir(root, dir string, seen map[string]bool) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		ext := filepath.Ext(path)
		if ext != ".yaml" && ext != ".yml" && d.Name() != "Kustomization" || seen[path] {
			return nil
		}
		seen[path] = true
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		content, err := ReadFile(root, rel)
		if err != nil {
			return nil // FindWorkloads reports it
		}
		a.readFile(filepath.ToSlash(rel), content)
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading Flux v2 image automation: %w", err)
	}
	return nil
}

// readFile adds the objects and markers of one file.
func (a *ImageAutomation) readFile(file string, content []byte) {
	if !bytes.Contains(content, []byte(fluxImageGroup)) && !bytes.Contains(content, []byte("$imagepolicy")) {
		return
	}
	dec := yaml.NewDecoder(bytes.NewReader(content))
	for doc := 0; ; doc++ {
		var d yaml.Node
		if err := dec.Decode(&d); err != nil {
			if !errors.Is(err, io.EOF) {
				a.Warnings = append(a.Warnings, fmt.Sprintf("%s: malformed YAML, its markers are not read: %v", file, err))
			}
			return
		}
		if len(d.Content) == 0 {
			continue
		}
		root := d.Content[0]
		if root.Kind == yaml.MappingNode && a.readObject(file, root) {
			continue
		}
		first := len(a.Setters)
		if IsKustomization(file) {
			a.findSetters(setterPlace{file: file, doc: doc, line: root.Line, obj: scalar(root, "kind")}, root, nil)
			a.findPatchSetters(file, doc, content, root)
			continue
		}
		for _, o := range objectsOf(root) {
			a.findSetters(setterPlace{file: file, doc: doc, line: o.node.Line, obj: o.name, prefix: o.prefix, kind: o.kind, name: o.meta}, o.node, nil)
		}
		kept := a.Setters[:first]
		for _, st := range a.Setters[first:] {
			o := setterObject(root, st.Path)
			if scalar(o, "kind") == "Secret" {
				// Its value would show in list-services, plans and
				// history as an image: fluxd neither shows nor sets a
				// Secret's data.
				a.Warnings = append(a.Warnings, fmt.Sprintf("%s:%d: a $imagepolicy marker in a Secret; fluxd neither reads nor sets a Secret's fields, so it is skipped (mark the image where a workload or a ConfigMap holds it)", file, st.Line))
				continue
			}
			st.Namespace = objectNamespace(o)
			kept = append(kept, st)
		}
		a.Setters = kept
	}
}

// markedObject is one object of a document: the document itself, or an
// item of a List (kind: List or a typed list, as kubectl applies them).
type markedObject struct {
	node       *yaml.Node
	kind, meta string // its kind and metadata.name
	// name is "Kind/namespace/name" ("" for a document that is no
	// object, such as a Helm values file), prefix the path from the
	// document's root to the object.
	name   string
	prefix []any
}

// objectsOf are the objects of a document's root: its items in a List,
// else the root.
func objectsOf(root *yaml.Node) []markedObject {
	kind := scalar(root, "kind")
	items := lookup(root, "items")
	if strings.HasSuffix(kind, "List") && items != nil && items.Kind == yaml.SequenceNode {
		itemKind := strings.TrimSuffix(kind, "List")
		out := []markedObject{{node: root, name: kind}}
		// The List itself, for markers outside its items (none that
		// Kubernetes applies; kept so that nothing marked goes unsaid).
		out[0].node = &yaml.Node{Kind: yaml.MappingNode, Line: root.Line, Column: root.Column}
		for i := 0; i+1 < len(root.Content); i += 2 {
			if root.Content[i].Value != "items" {
				out[0].node.Content = append(out[0].node.Content, root.Content[i], root.Content[i+1])
			}
		}
		for i, it := range items.Content {
			k := scalar(it, "kind")
			if k == "" {
				k = itemKind // a typed list's item may leave its kind out
			}
			out = append(out, markedObject{node: it, name: objectName(k, it), prefix: []any{"items", i}, kind: k, meta: scalar(lookup(it, "metadata"), "name")})
		}
		return out
	}
	kind = scalar(root, "kind")
	return []markedObject{{node: root, name: objectName(kind, root), kind: kind, meta: scalar(lookup(root, "metadata"), "name")}}
}

// objectName names an object in a marked field's name: "Kind/NS/NAME",
// its namespace "default" when it names none (as the sync applies it),
// so that same-named objects of two namespaces have fields of their own.
func objectName(kind string, obj *yaml.Node) string {
	if kind == "" {
		return ""
	}
	name := scalar(lookup(obj, "metadata"), "name")
	if name == "" {
		return kind
	}
	return kind + "/" + objectNamespace(obj) + "/" + name
}

// objectNamespace is an object's metadata.namespace, "default" when it
// names none.
func objectNamespace(obj *yaml.Node) string {
	if ns := scalar(lookup(obj, "metadata"), "namespace"); ns != "" {
		return ns
	}
	return "default"
}

// setterObject is the object holding the field at path in document
// root: the document, or, in a List (kind: List or a typed list, as
// kubectl applies them), its item.
func setterObject(root *yaml.Node, path []any) *yaml.Node {
	if strings.HasSuffix(scalar(root, "kind"), "List") && len(path) >= 2 && path[0] == "items" {
		if i, ok := path[1].(int); ok {
			if items := lookup(root, "items"); items != nil && items.Kind == yaml.SequenceNode && i < len(items.Content) {
				return items.Content[i]
			}
		}
	}
	return root
}

// setterPlace is where findSetters walks: a file's document, one object
// of it, and, in a kustomization, the inline patch the object is in.
type setterPlace struct {
	file string
	doc  int
	// line is where the object starts, obj its name, prefix the path
	// from the document's root to it.
	line       int
	obj        string
	prefix     []any
	kind, name string
	// patch is the path of the kustomization's inline patch, patchDoc
	// the document in it, and field how fields in it are named first.
	patch    []any
	patchDoc int
	field    string
}

// findSetters walks n (at path below its object) for marked scalars.
func (a *ImageAutomation) findSetters(at setterPlace, n *yaml.Node, path []any) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			a.findSetters(at, n.Content[i+1], append(path[:len(path):len(path)], n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			a.findSetters(at, c, append(path[:len(path):len(path)], i))
		}
	case yaml.ScalarNode:
		if n.LineComment == "" {
			return
		}
		pol, form, ok, err := ParseSetterComment(n.LineComment)
		if !ok {
			return
		}
		where := fmt.Sprintf("%s:%d", at.file, n.Line)
		if err != nil {
			a.Warnings = append(a.Warnings, where+": "+err.Error())
			return
		}
		field := at.file + ":" + at.field
		if at.obj != "" {
			field += at.obj + ":"
		}
		field += pathString(path)
		full := append(append([]any(nil), at.prefix...), path...)
		a.Setters = append(a.Setters, Setter{
			Field: field, File: at.file, Line: n.Line, Policy: pol, Form: form, Value: n.Value,
			Path: full, ObjectPath: path, ObjectLine: at.line, doc: at.doc, ObjectKind: at.kind, ObjectName: at.name,
			Patch: at.patch, patchDoc: at.patchDoc,
		})
	}
}

// patchKeys are a kustomization's keys whose items may be inline
// patches: patches[].patch, patchesJson6902[].patch and
// patchesStrategicMerge[] (a string holding YAML).
var patchKeys = []string{"patches", "patchesJson6902", "patchesStrategicMerge"}

// findPatchSetters reads the markers in a kustomization's inline
// patches. A marker there is a comment inside a YAML string, which
// fluxd can edit in place only where the string is a literal block
// (|), whose lines are the file's lines.
func (a *ImageAutomation) findPatchSetters(file string, doc int, content []byte, root *yaml.Node) {
	for _, key := range patchKeys {
		seq := lookup(root, key)
		if seq == nil || seq.Kind != yaml.SequenceNode {
			continue
		}
		for i, it := range seq.Content {
			patch, path := it, []any{key, i}
			if it.Kind == yaml.MappingNode {
				patch, path = lookup(it, "patch"), []any{key, i, "patch"}
			}
			if patch == nil || patch.Kind != yaml.ScalarNode || !strings.Contains(patch.Value, "$imagepolicy") {
				continue
			}
			where := fmt.Sprintf("%s:%d", file, patch.Line)
			if _, err := patchLines(content, patch); err != nil {
				a.Warnings = append(a.Warnings, fmt.Sprintf("%s: the inline patch %s holds a $imagepolicy marker, but %v; its markers are not updated", where, pathString(path), err))
				continue
			}
			dec := yaml.NewDecoder(strings.NewReader(patch.Value))
			for pd := 0; ; pd++ {
				var d yaml.Node
				if err := dec.Decode(&d); err != nil {
					if !errors.Is(err, io.EOF) {
						a.Warnings = append(a.Warnings, fmt.Sprintf("%s: the inline patch %s is malformed YAML, its markers are not read: %v", where, pathString(path), err))
					}
					break
				}
				if len(d.Content) == 0 {
					continue
				}
				proot := d.Content[0]
				at := setterPlace{
					file: file, doc: doc, line: root.Line, patch: path, patchDoc: pd,
					field: pathString(path) + ":", obj: objectName(scalar(proot, "kind"), proot),
				}
				if k := scalar(root, "kind"); k != "" {
					at.field = k + ":" + at.field // as the kustomization's own fields are named
				}
				first := len(a.Setters)
				a.findSetters(at, proot, nil)
				for j := first; j < len(a.Setters); j++ {
					a.Setters[j].Line += patch.Line // lines count from the string's
				}
			}
		}
	}
}

// patchLines checks that the inline patch n is a literal block scalar
// whose lines are content's lines after its indicator, indented alike,
// and returns that indentation.
func patchLines(content []byte, n *yaml.Node) (int, error) {
	if n.Style&yaml.LiteralStyle == 0 {
		return 0, errors.New("it is not written as a literal block (patch: |), the only form fluxd edits in place")
	}
	lines := strings.Split(string(content), "\n")
	inner := strings.Split(n.Value, "\n")
	indent := -1
	for i, l := range inner {
		if i+n.Line >= len(lines) {
			break
		}
		outer := strings.TrimRight(lines[i+n.Line], "\r")
		if l == "" {
			continue
		}
		if indent < 0 {
			indent = len(outer) - len(strings.TrimLeft(outer, " "))
		}
		if len(outer) < indent || strings.TrimSpace(outer[:indent]) != "" || outer[indent:] != l {
			return 0, fmt.Errorf("its line %d is not the file's line %d as written (tabs, or an indentation indicator?)", i+1, i+n.Line+1)
		}
	}
	if indent < 0 {
		return 0, errors.New("it is empty")
	}
	return indent, nil
}

// pathString writes a document path as dotted keys and [index]es.
func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch p := p.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(p) + "]")
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}

// SetterChange is one marked field's edit: From is the value git must
// hold (compare-and-swap), To the new one.
type SetterChange struct {
	Field    string
	From, To string
}

// SetSetters returns content (the file file, of service id) with the marked fields
// changed. Each change names the value it replaces; git holding another
// is a ConflictError. Only the bytes of each value change, in the quoting
// it had where the new value reads back as the same string in it (double
// quotes otherwise, so that 1.10 stays a string); the marker comment and
// everything else stay byte for byte. A field in a kustomization's inline
// patch is edited in the patch's lines alike. The result is read back and
// refused unless exactly those fields changed.
func SetSetters(id platform.ID, file string, content []byte, changes []SetterChange) ([]byte, error) {
	a := &ImageAutomation{}
	a.readFile(file, content)
	byField := map[string]Setter{}
	for _, s := range a.Setters {
		byField[s.Field] = s
	}
	var plain []Setter
	patches := map[string][]Setter{}
	var order []string
	for _, ch := range changes {
		s, ok := byField[ch.Field]
		if !ok {
			return nil, fmt.Errorf("%s: no field marked with $imagepolicy at %s: %w", file, ch.Field, ErrNoSuchContainer)
		}
		if s.Value != ch.From {
			return nil, &ConflictError{ID: id, What: "field " + ch.Field, Want: ch.From, Got: s.Value}
		}
		s.Value = ch.To
		if s.Patch == nil {
			plain = append(plain, s)
			continue
		}
		k := pathString(s.Patch)
		if _, ok := patches[k]; !ok {
			order = append(order, k)
		}
		patches[k] = append(patches[k], s)
	}
	out, err := setValues(content, plain)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for _, k := range order {
		if out, err = setInPatch(out, patches[k]); err != nil {
			return nil, fmt.Errorf("%s: the inline patch %s: %w", file, k, err)
		}
	}
	return out, nil
}

// setValues returns content with each setter's field set to its Value,
// read back and checked.
func setValues(content []byte, set []Setter) ([]byte, error) {
	var edits []yamledit.Edit
	for _, s := range set {
		key, val, flow, indent, err := nodeAt(content, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Field, err)
		}
		var vt yamledit.ValueText
		if key != nil {
			vt, err = yamledit.ValueSpan(content, key, val, yamledit.Context{Flow: flow, Indent: indent})
		} else {
			vt, err = yamledit.ScalarSpan(content, val, yamledit.Context{Flow: flow, Indent: indent})
		}
		if err != nil {
			return nil, fmt.Errorf("%s: finding its value: %w", s.Field, err)
		}
		text, err := yamledit.EncodeImage(s.Value, val.Style, flow)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Field, err)
		}
		edits = append(edits, yamledit.Edit{Span: vt.Span, Text: vt.Replace(text)})
	}
	out, err := yamledit.Apply(content, edits)
	if err != nil {
		return nil, err
	}
	if err := verifySetters(content, out, set); err != nil {
		return nil, fmt.Errorf("setting marked fields: %w", err)
	}
	return out, nil
}

// setInPatch returns content with the fields of one inline patch (set,
// all of one patch) set: the patch's YAML is edited as a file of its
// own, and the lines that changed are written back in the patch's
// literal block, indented as they were. The kustomization is read back:
// only the patch may differ, and it must read as the edited patch.
func setInPatch(content []byte, set []Setter) ([]byte, error) {
	first := set[0]
	outer := Setter{Field: pathString(first.Patch), Path: first.Patch, doc: first.doc}
	_, n, _, _, err := nodeAt(content, outer)
	if err != nil {
		return nil, err
	}
	indent, err := patchLines(content, n)
	if err != nil {
		return nil, err
	}
	inner := make([]Setter, len(set))
	for i, s := range set {
		s.doc, s.Patch = s.patchDoc, nil
		inner[i] = s
	}
	edited, err := setValues([]byte(n.Value), inner)
	if err != nil {
		return nil, err
	}
	was, now := strings.Split(n.Value, "\n"), strings.Split(string(edited), "\n")
	if len(was) != len(now) {
		return nil, errors.New("the edit would change how many lines it has; nothing was changed")
	}
	lines := strings.SplitAfter(string(content), "\n")
	for i := range was {
		if was[i] == now[i] {
			continue
		}
		l := n.Line + i // the block's first line follows its indicator's
		if l >= len(lines) {
			return nil, errors.New("the patch runs past the end of the file; nothing was changed")
		}
		body := strings.TrimRight(lines[l], "\r\n")
		if len(body) < indent || body[indent:] != was[i] {
			return nil, fmt.Errorf("its line %d is not the file's line %d; nothing was changed", i+1, l+1)
		}
		lines[l] = body[:indent] + now[i] + lines[l][len(body):]
	}
	out := []byte(strings.Join(lines, ""))
	outer.Value = string(edited)
	if err := verifySetters(content, out, []Setter{outer}); err != nil {
		return nil, err
	}
	return out, nil
}

// nodeAt finds setter s's key and value nodes in content, and the
// context the scanner needs (flow style, the indentation of what holds
// it). key is nil for an item of a sequence.
func nodeAt(content []byte, s Setter) (key, val *yaml.Node, flow bool, indent int, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var d yaml.Node
	for i := 0; i <= s.doc; i++ {
		d = yaml.Node{}
		if err := dec.Decode(&d); err != nil {
			return nil, nil, false, 0, fmt.Errorf("reading document %d: %w", s.doc+1, err)
		}
	}
	if len(d.Content) == 0 {
		return nil, nil, false, 0, errors.New("the document is empty")
	}
	n := d.Content[0]
	for _, p := range s.Path {
		flow = flow || n.Style&yaml.FlowStyle != 0
		switch p := p.(type) {
		case string:
			k, v := entry(n, p)
			if v == nil {
				return nil, nil, false, 0, fmt.Errorf("no key %q", p)
			}
			key, val, indent = k, v, k.Column-1
		case int:
			if n.Kind != yaml.SequenceNode || p >= len(n.Content) {
				return nil, nil, false, 0, fmt.Errorf("no item %d", p)
			}
			key, val, indent = nil, n.Content[p], n.Column-1
		}
		n = val
	}
	if val == nil || val.Kind != yaml.ScalarNode {
		return nil, nil, false, 0, errors.New("not a scalar")
	}
	return key, val, flow, indent, nil
}

// verifySetters reads the file before and after as Kubernetes would, and
// checks that the only differences are the setters' new values.
func verifySetters(before, after []byte, set []Setter) error {
	want, err := decodeDocs(before)
	if err != nil {
		return fmt.Errorf("reading the file before the edit: %w", err)
	}
	got, err := decodeDocs(after)
	if err != nil {
		return fmt.Errorf("the edited file would not parse (%w); nothing was changed", err)
	}
	if len(want) != len(got) {
		return fmt.Errorf("the edited file would hold %d documents instead of %d; nothing was changed", len(got), len(want))
	}
	for _, s := range set {
		if s.doc >= len(want) {
			return fmt.Errorf("%s: no document %d", s.Field, s.doc+1)
		}
		if !setAt(want[s.doc], s.Path, s.Value) {
			return fmt.Errorf("%s: the field is not where its marker is, read as Kubernetes reads it (an alias or a merge key?); nothing was changed", s.Field)
		}
	}
	for i := range want {
		if path, ok := firstDiff(want[i], got[i], ""); !ok {
			if path == "" {
				path = "its top level"
			}
			return fmt.Errorf("the edited file would differ from the intended one in document %d at %s; nothing was changed (please report this with the file)", i+1, path)
		}
	}
	return nil
}

// setAt sets the value at path in a decoded document.
func setAt(doc any, path []any, v string) bool {
	if len(path) == 0 {
		return false
	}
	cur := doc
	for i, p := range path {
		last := i == len(path)-1
		switch p := p.(type) {
		case string:
			switch m := cur.(type) {
			case map[string]any:
				if _, ok := m[p]; !ok {
					return false
				}
				if last {
					m[p] = v
					return true
				}
				cur = m[p]
			case map[any]any:
				if _, ok := m[p]; !ok {
					return false
				}
				if last {
					m[p] = v
					return true
				}
				cur = m[p]
			default:
				return false
			}
		case int:
			l, ok := cur.([]any)
			if !ok || p >= len(l) {
				return false
			}
			if last {
				l[p] = v
				return true
			}
			cur = l[p]
		}
	}
	return false
}

// sortSetters orders setters by field, for stable listings.
func sortSetters(s []Setter) {
	sort.Slice(s, func(i, j int) bool { return s[i].Field < s[j].Field })
}

// ValueFor is what field s holds of image (repository:tag, or
// repository:tag@digest where the ImagePolicy reflects digests): the
// whole image, its tag, its repository, or its digest.
func (s Setter) ValueFor(image string) (string, error) {
	// A digest (repo:tag@sha256:...) is the whole image's and the
	// :digest field's only: a :tag or :name field takes the tag or the
	// name without it.
	untagged, digest, _ := strings.Cut(image, "@")
	repo, tag := untagged, ""
	if i := strings.LastIndexByte(untagged, ':'); i > strings.LastIndexByte(untagged, '/') {
		repo, tag = untagged[:i], untagged[i+1:]
	}
	switch s.Form {
	case FormImage:
		return image, nil
	case FormTag:
		return tag, nil
	case FormName:
		return repo, nil
	}
	if digest == "" {
		return "", fmt.Errorf("%s is a :digest field, but %s names no digest: its ImagePolicy reflects none (spec.digestReflectionPolicy IfNotPresent or Always makes it)", s.Field, image)
	}
	return digest, nil
}
