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
	// ("apps/app.yaml:ConfigMap/app:data.TAG"); it is the field's name in
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
	// Path locates the field in its document; ObjectLine is where the
	// document's object starts (as Render names objects); doc is the
	// document's index in the file.
	Path       []any
	ObjectLine int
	doc        int
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
		obj := ""
		if k := scalar(root, "kind"); k != "" {
			obj = k
			if n := scalar(lookup(root, "metadata"), "name"); n != "" {
				obj += "/" + n
			}
		}
		first := len(a.Setters)
		a.findSetters(file, doc, root.Line, obj, root, nil)
		if IsKustomization(file) {
			continue
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
			st.Namespace = "default"
			if ns := scalar(lookup(o, "metadata"), "namespace"); ns != "" {
				st.Namespace = ns
			}
			kept = append(kept, st)
		}
		a.Setters = kept
	}
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

// findSetters walks n (at path in its document) for marked scalars.
func (a *ImageAutomation) findSetters(file string, doc, line int, obj string, n *yaml.Node, path []any) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			a.findSetters(file, doc, line, obj, n.Content[i+1], append(path[:len(path):len(path)], n.Content[i].Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			a.findSetters(file, doc, line, obj, c, append(path[:len(path):len(path)], i))
		}
	case yaml.ScalarNode:
		if n.LineComment == "" {
			return
		}
		pol, form, ok, err := ParseSetterComment(n.LineComment)
		if !ok {
			return
		}
		where := fmt.Sprintf("%s:%d", file, n.Line)
		if err != nil {
			a.Warnings = append(a.Warnings, where+": "+err.Error())
			return
		}
		field := file + ":"
		if obj != "" {
			field += obj + ":"
		}
		field += pathString(path)
		a.Setters = append(a.Setters, Setter{Field: field, File: file, Line: n.Line, Policy: pol, Form: form, Value: n.Value, Path: path, ObjectLine: line, doc: doc})
	}
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
// everything else stay byte for byte. The result is read back and refused
// unless exactly those fields changed.
func SetSetters(id platform.ID, file string, content []byte, changes []SetterChange) ([]byte, error) {
	a := &ImageAutomation{}
	a.readFile(file, content)
	byField := map[string]Setter{}
	for _, s := range a.Setters {
		byField[s.Field] = s
	}
	var edits []edit
	var done []Setter
	for _, ch := range changes {
		s, ok := byField[ch.Field]
		if !ok {
			return nil, fmt.Errorf("%s: no field marked with $imagepolicy at %s: %w", file, ch.Field, ErrNoSuchContainer)
		}
		if s.Value != ch.From {
			return nil, &ConflictError{ID: id, What: "field " + ch.Field, Want: ch.From, Got: s.Value}
		}
		key, val, flow, indent, err := nodeAt(content, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ch.Field, err)
		}
		var vt valueText
		if key != nil {
			vt, err = valueSpan(content, key, val, nodeContext{flow: flow, indent: indent})
		} else {
			vt, err = scalarSpan(content, val, nodeContext{flow: flow, indent: indent})
		}
		if err != nil {
			return nil, fmt.Errorf("%s: finding its value: %w", ch.Field, err)
		}
		text, err := encodeImage(ch.To, val.Style, flow)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ch.Field, err)
		}
		edits = append(edits, edit{vt.span, vt.replace(text)})
		s.Value = ch.To
		done = append(done, s)
	}
	out, err := applyEdits(content, edits)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := verifySetters(content, out, done); err != nil {
		return nil, fmt.Errorf("%s: setting marked fields: %w", file, err)
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

// ValueFor is what field s holds of image (repository:tag): the whole
// image, its tag, or its repository. A :digest field has no value from a
// tag alone.
func (s Setter) ValueFor(image string) (string, error) {
	// A digest (repo:tag@sha256:...) is the whole image's only: a :tag or
	// :name field takes the tag or the name without it.
	untagged, _, _ := strings.Cut(image, "@")
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
	return "", fmt.Errorf("%s: fluxd does not write :digest fields yet (not implemented); use the :tag form, or the whole image", s.Field)
}
