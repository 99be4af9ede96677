package gitrepo

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/helmrelease"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/policy"
)

// Container is one container of a workload definition.
type Container struct {
	Name  string
	Image string
	Init  bool
}

// Definition is a workload as defined in a file of the repository.
type Definition struct {
	ID platform.ID
	// File is the file's path relative to the repository root.
	File string
	// Line is where the definition starts in the file.
	Line       int
	Containers []Container
	// Annotations are the workload's metadata.annotations with its policy
	// in fluxd's own vocabulary (policy.Read): what every reader of a
	// policy reads, whichever tool's annotations git holds.
	Annotations map[string]string
	// RawAnnotations are the metadata.annotations as written, for edits
	// (policy.Write) and checks of what a commit changed.
	RawAnnotations map[string]string
	// Warnings say where the policy annotations disagree or ask for what
	// fluxd cannot do.
	Warnings []string
	// Dialects are the policy dialects its annotations and labels are
	// written in (policy.Dialects), for fluxctl check.
	Dialects []string
	// Digest identifies what the definition says (its YAML tree; comments
	// and layout aside): see digest.
	Digest string
	// Format is how git writes its images, so how fluxd edits them and
	// what a change of them applies (package gitrepo/format): set where
	// the definition is read.
	Format Format
	// Built is set for a workload a kustomization builds: File is then
	// the kustomization file, and a release edits its images: entries.
	Built bool
	// Source is set for a HelmRelease a kustomization builds from a file
	// in its own directory, unrenamed and with its values as built: that
	// file, where a release edits its values (helmSource).
	Source string
	// Replicas is spec.replicas when git sets it, for drift: nil when it
	// leaves it out (an autoscaler's to set).
	Replicas *int32
	// ImagePolicy is set on a Flux v2 ImagePolicy's service
	// (NS:imagepolicy/NAME): its Containers are the fields marked with
	// it that an ImageUpdateAutomation covers (Setters), and Author the
	// automation's commit author, if it names one (imageautomation.go).
	ImagePolicy *ImagePolicy
	Setters     []Setter
	Author      *Signature
	// InstallsInto are the namespaces other than its own that what it
	// makes lands in: a HelmRelease's spec.targetNamespace and
	// spec.storageNamespace. A scoped instance holds it only when it
	// holds them too.
	InstallsInto []string
}

// Problem is a file that could not be read as manifests; it is skipped.
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

// DuplicateError is two definitions of one workload.
type DuplicateError struct {
	ID     platform.ID
	First  string // file:line
	Second string
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%s is defined twice, in %s and in %s; remove one of them", e.ID, e.First, e.Second)
}

// Manifests is what FindWorkloads found.
type Manifests struct {
	// Workloads by ID. A workload defined twice is left out and reported
	// in Problems, since fluxd cannot know which definition to edit.
	Workloads map[platform.ID]*Definition
	// Problems are files or definitions that were skipped, with why.
	Problems []error
}

// ResolvePaths turns the configured sub-paths into absolute directories
// inside root, refusing absolute paths and any that escape root.
func ResolvePaths(root string, paths []string) ([]string, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var out []string
	for _, p := range paths {
		if p == "" || filepath.IsAbs(p) {
			return nil, fmt.Errorf("git path %q must be a relative path inside the repository, such as deploy/ or .", p)
		}
		clean := filepath.Clean(p)
		if clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("git path %q leads outside the repository", p)
		}
		abs := filepath.Join(root, clean)
		if link := linkIn(root, clean); link != "" {
			return nil, fmt.Errorf("git path %q goes through %s, a symbolic link in the repository; fluxd reads only what is inside the clone, so give the directory it points to", p, link)
		}
		fi, err := os.Stat(abs)
		if err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("git path %q is not a directory in the repository; check --git-path and --git-branch", p)
		}
		out = append(out, abs)
	}
	return out, nil
}

// FindWorkloads reads every *.yaml and *.yml file under the directories
// dirs (absolute, inside root) and returns the workloads they define.
// A malformed file is reported in Problems and skipped.
func FindWorkloads(root string, dirs []string) (*Manifests, error) {
	m := &Manifests{Workloads: map[platform.ID]*Definition{}}
	dups := map[platform.ID]bool{}
	seen := map[string]bool{}
	add := func(def *Definition) {
		if prev, ok := m.Workloads[def.ID]; ok || dups[def.ID] {
			if ok {
				m.Problems = append(m.Problems, &DuplicateError{ID: def.ID, First: where(prev), Second: where(def)})
				delete(m.Workloads, def.ID)
				dups[def.ID] = true
			}
			return
		}
		m.Workloads[def.ID] = def
	}
	var kust *kustomizer
	// Flux v2's objects and markers are read from the same files, in the
	// same walk (a kustomization's directory is walked for them apart).
	fluxv2 := &ImageAutomation{kustomized: map[string]bool{}}
	fluxSeen := map[string]bool{}
	builds := map[string][]string{} // file → the kustomization files whose build reads it
	// file → kustomization file → the name prefixes and suffixes its
	// build gives the file's objects, where fluxd can tell them exactly
	affixes := map[string]map[string][]affix{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == ".git" {
					return filepath.SkipDir
				}
				if KustomizationFile(path) == "" || seen[path] {
					return nil
				}
				// A kustomization is one unit, as 'kubectl apply -k'
				// sees it: its workloads are what it builds.
				seen[path] = true
				rel, err := filepath.Rel(root, path)
				if err != nil {
					return err
				}
				if kust == nil {
					if kust, err = newKustomizer(root); err != nil {
						return err
					}
				}
				defs, err := kust.workloads(rel)
				if err != nil {
					m.Problems = append(m.Problems, err)
				}
				for _, def := range defs {
					add(def)
				}
				if err := fluxv2.readDir(root, path, fluxSeen); err != nil {
					return err
				}
				// A marker in any file the build reads (a base
				// outside --git-path too) moves what it builds.
				kfile := filepath.ToSlash(filepath.Join(rel, KustomizationFile(path)))
				fluxv2.kustomized[filepath.ToSlash(rel)] = true
				named, exact := kust.affixes(rel)
				for _, f := range kust.reads(rel) {
					builds[f] = append(builds[f], kfile)
					if a, ok := named[f]; ok && exact {
						if affixes[f] == nil {
							affixes[f] = map[string][]affix{}
						}
						affixes[f][kfile] = a
					}
					abs := filepath.Join(root, filepath.FromSlash(f))
					if fluxSeen[abs] || filepath.Ext(f) != ".yaml" && filepath.Ext(f) != ".yml" && !IsKustomization(f) {
						continue
					}
					fluxSeen[abs] = true
					if b, err := ReadFile(root, f); err == nil {
						fluxv2.readFile(f, b)
					}
				}
				return filepath.SkipDir
			}
			ext := filepath.Ext(path)
			if ext != ".yaml" && ext != ".yml" || seen[path] {
				return nil
			}
			seen[path] = true
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			content, err := ReadFile(root, rel)
			if err != nil {
				m.Problems = append(m.Problems, err)
				return nil
			}
			fluxSeen[path] = true
			fluxv2.readFile(filepath.ToSlash(rel), content)
			defs, err := ParseFile(rel, content)
			if err != nil {
				m.Problems = append(m.Problems, err)
				return nil
			}
			for _, def := range defs {
				add(def)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading manifests: %w", err)
		}
	}
	attachImageAutomation(fluxv2, m, builds, affixes)
	return m, nil
}

// where is a definition's file:line, or its kustomization file.
func where(d *Definition) string {
	if d.Line > 0 {
		return fmt.Sprintf("%s:%d", d.File, d.Line)
	}
	return d.File
}

// linkIn returns the first component of rel (relative to root) that is a
// symbolic link, or "" when none is: the directories on the way count as
// much as the file.
func linkIn(root, rel string) string {
	cur := root
	for _, part := range strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/") {
		if part == "" || part == "." {
			continue
		}
		cur = filepath.Join(cur, part)
		if fi, err := os.Lstat(cur); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			r, _ := filepath.Rel(root, cur)
			return r
		}
	}
	return ""
}

// MaxFileSize bounds a manifest file: a bigger one is reported and
// skipped, so that no file in the repository makes fluxd run out of
// memory.
const MaxFileSize = 4 << 20

// ReadFile reads the manifest file rel (relative to the clone's root),
// which must be a regular file of at most MaxFileSize bytes. A symbolic
// link is never followed: the repository's content is not fluxd's to
// trust, and a link to /dev/zero or out of the clone would be read as if
// it were a manifest. Its errors are Problems naming the file.
func ReadFile(root, rel string) ([]byte, error) {
	path := filepath.Join(root, rel)
	if link := linkIn(root, rel); link != "" {
		return nil, Problem{File: rel, Err: fmt.Errorf("goes through %s, a symbolic link; fluxd reads only regular files inside the clone, so it is skipped (replace the link with what it points to)", link)}
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, Problem{File: rel, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return nil, Problem{File: rel, Err: fmt.Errorf("is not a regular file (%s), so it is skipped", fi.Mode().Type())}
	}
	if fi.Size() > MaxFileSize {
		return nil, Problem{File: rel, Err: fmt.Errorf("is %d bytes, more than the %d MiB fluxd reads in a manifest, so it is skipped (split it into several files)", fi.Size(), MaxFileSize>>20)}
	}
	// O_NOFOLLOW: a link put in its place since Lstat is not followed.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, Problem{File: rel, Err: err}
	}
	defer f.Close()
	// Read what Lstat saw in one go; the file may have grown since.
	b := make([]byte, 0, fi.Size()+1)
	for {
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, Problem{File: rel, Err: err}
		}
		if len(b) > MaxFileSize {
			break
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
	if len(b) > MaxFileSize {
		return nil, Problem{File: rel, Err: fmt.Errorf("is more than the %d MiB fluxd reads in a manifest, so it is skipped (split it into several files)", MaxFileSize>>20)}
	}
	return b, nil
}

// ParseFile returns the workload definitions in one file's content. file is
// only used to name it in the definitions and errors.
func ParseFile(file string, content []byte) ([]*Definition, error) {
	var defs []*Definition
	h := sha256.New()
	err := eachWorkload(content, func(w workload) error {
		def := &Definition{ID: w.id, File: file, Line: w.obj.Line, Format: KindFormat(w.id.Kind), RawAnnotations: map[string]string{}, Digest: digest(h, w.obj)}
		for _, c := range containerNodes(w.obj, w.id.Kind) {
			def.Containers = append(def.Containers, Container{Name: c.name, Image: c.image.Value, Init: c.init})
		}
		var helmWarnings []string
		if def.Format == FormatHelm {
			def.Containers, helmWarnings = helmContainers(w.obj)
			for _, f := range []string{"targetNamespace", "storageNamespace"} {
				if ns := scalar(lookup(w.obj, "spec"), f); ns != "" && ns != w.id.Namespace && !slices.Contains(def.InstallsInto, ns) {
					def.InstallsInto = append(def.InstallsInto, ns)
				}
			}
		}
		if r := lookup(w.obj, "spec", "replicas"); r != nil && r.Kind == yaml.ScalarNode {
			if n, err := strconv.ParseInt(r.Value, 10, 32); err == nil {
				n := int32(n)
				def.Replicas = &n
			}
		}
		if ann := lookup(w.obj, "metadata", "annotations"); ann != nil && ann.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(ann.Content); i += 2 {
				def.RawAnnotations[ann.Content[i].Value] = ann.Content[i+1].Value
			}
		}
		// Keel reads its policy from the labels too.
		labels := map[string]string{}
		if l := lookup(w.obj, "metadata", "labels"); l != nil && l.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(l.Content); i += 2 {
				labels[l.Content[i].Value] = l.Content[i+1].Value
			}
		}
		def.Annotations, def.Warnings = policy.ReadObject(def.RawAnnotations, labels)
		def.Dialects = policy.Dialects(def.RawAnnotations, labels)
		// What a dialect defines but does nothing here is said, in
		// list-services and fluxctl check alike.
		names := make([]string, 0, len(def.Containers))
		for _, c := range def.Containers {
			names = append(names, c.Name)
		}
		def.Warnings = append(def.Warnings, policy.Unhonoured(def.RawAnnotations, policy.Object{HelmRelease: def.Format == FormatHelm, Containers: names})...)
		def.Warnings = append(def.Warnings, helmWarnings...)
		defs = append(defs, def)
		return nil
	})
	if err != nil {
		var pe Problem
		if errors.As(err, &pe) {
			pe.File = file
			return nil, pe
		}
		return nil, Problem{File: file, Err: err}
	}
	return defs, nil
}

// workload is one workload object found in a file.
type workload struct {
	obj *yaml.Node
	id  platform.ID
	// doc is the index of the document in the file's stream, item the
	// index in its List's items or -1 for a document of its own.
	doc, item int
	// apiVersion and kind are the typed List's, for an item that leaves
	// them out (as the API server's own lists do); empty otherwise.
	apiVersion, kind string
}

// eachWorkload calls fn for every workload object in content: the
// documents of a multi-document stream and the items of kind: List and of
// typed lists (DeploymentList, ...), which kubectl apply accepts alike.
func eachWorkload(content []byte, fn func(workload) error) error {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	for doc := 0; ; doc++ {
		var d yaml.Node
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return Problem{Line: errorLine(err), Err: fmt.Errorf("malformed YAML: %w", err)}
		}
		if len(d.Content) == 0 {
			continue
		}
		root := d.Content[0]
		if root.Kind != yaml.MappingNode {
			continue
		}
		kind := scalar(root, "kind")
		if !strings.HasSuffix(kind, "List") {
			if id, ok := workloadID(root, ""); ok {
				if err := fn(workload{obj: root, id: id, doc: doc, item: -1}); err != nil {
					return err
				}
			}
			continue
		}
		items := lookup(root, "items")
		if items == nil || items.Kind != yaml.SequenceNode {
			continue
		}
		// An item of a typed list may leave out its kind and apiVersion;
		// kubectl then takes them from the list (see apimachinery's
		// unstructuredJSONScheme.decodeToList).
		itemKind := strings.TrimSuffix(kind, "List")
		for i, obj := range items.Content {
			w := workload{obj: obj, doc: doc, item: i}
			if scalar(obj, "kind") == "" && scalar(obj, "apiVersion") == "" && itemKind != "" {
				w.apiVersion, w.kind = scalar(root, "apiVersion"), itemKind
			}
			id, ok := workloadID(obj, w.kind)
			if !ok {
				continue
			}
			w.id = id
			if err := fn(w); err != nil {
				return err
			}
		}
	}
}

// errorLine digs the line number out of a yaml.v3 error message
// ("yaml: line 7: ..."), since yaml.v3 has no typed syntax error.
func errorLine(err error) int {
	var line int
	msg := err.Error()
	if i := strings.Index(msg, "line "); i >= 0 {
		fmt.Sscanf(msg[i:], "line %d", &line)
	}
	return line
}

// workloadID is obj's ID if it is a workload; kind is used when obj says
// none.
func workloadID(obj *yaml.Node, kind string) (platform.ID, bool) {
	if obj.Kind != yaml.MappingNode {
		return platform.ID{}, false
	}
	if k := scalar(obj, "kind"); k != "" {
		kind = k
	}
	switch lk := strings.ToLower(kind); {
	case helmrelease.IsHelmRelease(scalar(obj, "apiVersion"), kind):
	case lk == "imagepolicy":
		// A Flux v2 ImagePolicy is the service its marked fields hang on.
		if !strings.HasPrefix(scalar(obj, "apiVersion"), fluxImageGroup) {
			return platform.ID{}, false
		}
	case !slices.Contains(platform.Kinds, lk) || lk == platform.KindHelmRelease:
		// A HelmRelease of another API group (not Flux's) is not one.
		return platform.ID{}, false
	}
	kind = strings.ToLower(kind)
	name := scalar(lookup(obj, "metadata"), "name")
	if name == "" {
		return platform.ID{}, false
	}
	ns := scalar(lookup(obj, "metadata"), "namespace")
	if ns == "" {
		ns = "default"
	}
	return platform.ID{Namespace: ns, Kind: kind, Name: name}, true
}

type containerNode struct {
	name string
	// key is the image key, image its value.
	key, image *yaml.Node
	// flow is whether the container is written in flow style.
	flow bool
	init bool
}

// containerNodes returns the image nodes of a workload object's
// containers, init containers first.
func containerNodes(obj *yaml.Node, kind string) []containerNode {
	path := []string{"spec", "template", "spec"}
	if kind == "cronjob" {
		path = []string{"spec", "jobTemplate", "spec", "template", "spec"}
	}
	podSpec := lookup(obj, path...)
	var out []containerNode
	for _, list := range []struct {
		key  string
		init bool
	}{{"initContainers", true}, {"containers", false}} {
		seq := lookup(podSpec, list.key)
		if seq == nil || seq.Kind != yaml.SequenceNode {
			continue
		}
		for _, c := range seq.Content {
			key, img := entry(c, "image")
			if img == nil || img.Kind != yaml.ScalarNode {
				continue
			}
			out = append(out, containerNode{name: scalar(c, "name"), key: key, image: img, flow: c.Style&yaml.FlowStyle != 0, init: list.init})
		}
	}
	return out
}

// lookup follows keys through nested mappings; nil if any is missing.
func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		_, n = entry(n, k)
	}
	return n
}

// entry is the key and value nodes of mapping n's entry k; nils if n is
// not a mapping or has no such entry.
func entry(n *yaml.Node, k string) (key, value *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

func scalar(n *yaml.Node, key string) string {
	v := lookup(n, key)
	if v == nil || v.Kind != yaml.ScalarNode {
		return ""
	}
	return v.Value
}

// sortedIDs returns the map's IDs in order.
func sortedIDs(m map[platform.ID]*Definition) []platform.ID {
	ids := make([]platform.ID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, platform.ID.Compare)
	return ids
}
