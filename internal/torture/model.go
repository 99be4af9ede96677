package torture

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Workload is one service as a commit defines it: a Deployment, a Flux
// v2 ImagePolicy (fluxv2.go) or a Flux v2 HelmRelease (helm.go).
type Workload struct {
	// Images maps a container's name to its image. An ImagePolicy's
	// containers are its marked fields, named as fluxd names them
	// (FILE:KIND/NAME:PATH); a :tag field's image is its
	// ImageRepository's image with the field's value as the tag.
	Images map[string]string
	// Annotations are the workload's own (metadata.annotations); an
	// ImagePolicy's are the ImagePolicy object's.
	Annotations map[string]string
	// Marked lists a Deployment's containers whose image field carries
	// a $imagepolicy marker: a change of one is its policy's, so Diff
	// counts it there, not here.
	Marked map[string]bool
	// Holders are the workloads (service IDs) holding an ImagePolicy's
	// marked fields: a lock on one holds the policy too.
	Holders []string
	// Kept maps a container to the text around its value, with the
	// value's bytes masked: what must stay byte for byte when fluxd sets
	// it. For an ImagePolicy's field, its line (the marker comment, the
	// spacing, the quotes); for a HelmRelease's image, its values block.
	Kept map[string]string
}

// Locked reports whether the workload's own annotations lock it. An
// ImagePolicy's service is also locked by its holders: see LockedIn.
func (w Workload) Locked() bool { return w.Annotations["fluxd.io/locked"] == "true" }

// LockedIn reports whether fluxd must not release the service id, as
// the commit whose workloads are ws defines it, and why: its own lock
// (a Deployment's or an ImagePolicy's fluxd.io/locked), or, for an
// ImagePolicy, the lock of a workload holding one of its marked fields
// (fluxd refuses to move a workload locked in git through its marker).
func LockedIn(ws map[string]Workload, id string) (bool, string) {
	w, ok := ws[id]
	if !ok {
		return false, ""
	}
	if w.Locked() {
		return true, lockNote(w)
	}
	for _, h := range w.Holders {
		if hw, ok := ws[h]; ok && hw.Locked() {
			return true, "its field's workload " + h + " is locked: " + lockNote(hw)
		}
	}
	return false, ""
}

// Commit is one commit of the branch, as the git CLI reads it.
type Commit struct {
	Hash    string
	Parents []string
	// Committer is the committer's name: fluxd's --git-user for its
	// commits, the person's for theirs.
	Committer string
	Message   string
	// Workloads maps a service ID to its definition at this commit.
	Workloads map[string]Workload
}

// Subject is the message's first line.
func (c *Commit) Subject() string { s, _, _ := strings.Cut(c.Message, "\n"); return s }

// JobTrailer returns the ID in the message's "Fluxd-Job: ID" line, or "".
func (c *Commit) JobTrailer() string {
	for _, l := range strings.Split(c.Message, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(l), "Fluxd-Job:"); ok {
			return strings.TrimSpace(id)
		}
	}
	return ""
}

// Update is one container's image change.
type Update struct {
	Service, Container, From, To string
}

func (u Update) String() string {
	return fmt.Sprintf("%s %s: %s -> %s", u.Service, u.Container, u.From, u.To)
}

// Job is a release job as the history database keeps it.
type Job struct {
	ID, State, Commit, Error string
	// Stage is the job's last stage ("applied, not rolled out" when
	// nothing reported on its rollout).
	Stage string
	// User is the spec's user (the suite gives each release its own).
	User      string
	Automated bool
	// Updates is the recorded plan's changes.
	Updates []Update
}

// Services is the set of services the job's plan changes, sorted.
func (j Job) Services() []string {
	seen := map[string]bool{}
	var out []string
	for _, u := range j.Updates {
		if !seen[u.Service] {
			seen[u.Service] = true
			out = append(out, u.Service)
		}
	}
	sort.Strings(out)
	return out
}

// Event is one history row.
type Event struct {
	ID       int64
	Type     string
	Services []string
	User     string
	Commit   string
	Changes  []Update
	Error    string
	Message  string
}

// Observation is everything the checkers look at, read from outside once
// the run has settled.
type Observation struct {
	// Head is the branch's head; Order lists every commit reachable from
	// it, parents before children, and Commits holds them by hash.
	Head    string
	Order   []string
	Commits map[string]*Commit
	// FluxdCommitter is fluxd's --git-user.
	FluxdCommitter string
	// PersonCommits are the commits people pushed during the run.
	PersonCommits []string
	Jobs          []Job
	Events        []Event
	// Cluster maps a service ID to its containers' images in the cluster
	// (a Deployment's, a HelmRelease's values'); nil skips the cluster
	// half of (e).
	Cluster map[string]map[string]string
	// Formats maps each service of the run (its ID) to its format: what
	// (g) counts fluxd's commits by. Nil: (g) judges nothing.
	Formats map[string]Format
	// HelmUnreported says no Helm controller runs: nothing ever reports
	// a HelmRelease's rollout, so each release that moves one ends
	// "applied, not rolled out", and only those.
	HelmUnreported bool
}

// ParseWorkloads reads the Deployments among files (YAML, several
// documents each, kind: List items too; named by their path in the
// repository) into workloads by service ID, the Flux v2 ImagePolicies
// with the fields their $imagepolicy markers mark (NS:imagepolicy/NAME),
// and the Flux v2 HelmReleases with the image in their values
// (NS:helmrelease/NAME). A file in a kustomization's directory is read
// as each kustomization that reads it builds it (kustomize.go): its
// Deployments named and their images set as the build makes them.
func ParseWorkloads(files map[string][]byte) (map[string]Workload, error) {
	out := map[string]Workload{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	builds, built, err := kustomize(files)
	if err != nil {
		return nil, err
	}
	v2 := newFluxV2()
	for _, name := range names {
		ways := builds[name] // a built file that no build reads reaches nothing
		if !built[name] {
			ways = []build{{}} // as it is
		}
		dec := yaml.NewDecoder(bytes.NewReader(files[name]))
		lines := strings.Split(string(files[name]), "\n")
		for {
			var node yaml.Node
			err := dec.Decode(&node)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("parsing %s: %w", name, err)
			}
			for _, obj := range objects(&node) {
				if err := readObject(out, v2, name, lines, obj, ways); err != nil {
					return nil, err
				}
			}
		}
	}
	v2.services(out)
	return out, nil
}

// objects are the objects of a document: the document itself, or the
// items of a kind: List (or a typed list, DeploymentList), as kubectl
// applies them.
func objects(doc *yaml.Node) []*yaml.Node {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	root := doc.Content[0]
	kind := mapEntryValue(root, "kind")
	items := mapEntryValue(root, "items")
	if kind != nil && strings.HasSuffix(kind.Value, "List") && items != nil && items.Kind == yaml.SequenceNode {
		var out []*yaml.Node
		for _, it := range items.Content {
			if it.Kind == yaml.MappingNode {
				out = append(out, it)
			}
		}
		return out
	}
	return []*yaml.Node{root}
}

// readObject reads one object (a mapping node) of file, whose text is
// lines, as each of ways makes it.
func readObject(out map[string]Workload, v2 *fluxV2, file string, lines []string, obj *yaml.Node, ways []build) error {
	var doc struct {
		Kind     string `yaml:"kind"`
		Metadata struct {
			Name        string            `yaml:"name"`
			Namespace   string            `yaml:"namespace"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name  string `yaml:"name"`
						Image string `yaml:"image"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := obj.Decode(&doc); err != nil {
		return fmt.Errorf("parsing %s: %w", file, err)
	}
	ns := doc.Metadata.Namespace
	if ns == "" {
		ns = "default"
	}
	var holders []string
	if doc.Kind == "Deployment" {
		for _, b := range ways {
			holders = append(holders, ns+":deployment/"+b.name(doc.Metadata.Name))
		}
	}
	if err := v2.read(file, lines, obj, holders); err != nil {
		return err
	}
	if id, w, ok, err := readHelmRelease(file, lines, obj); err != nil {
		return err
	} else if ok {
		out[id] = w
	}
	if doc.Kind != "Deployment" {
		return nil
	}
	for i, b := range ways {
		w := Workload{Images: map[string]string{}, Annotations: map[string]string{}}
		for k, v := range doc.Metadata.Annotations {
			w.Annotations[k] = v
		}
		for _, c := range doc.Spec.Template.Spec.Containers {
			w.Images[c.Name] = b.image(c.Image)
		}
		for _, c := range markedContainers(obj) {
			if w.Marked == nil {
				w.Marked = map[string]bool{}
			}
			w.Marked[doc.Spec.Template.Spec.Containers[c].Name] = true
		}
		out[holders[i]] = w
	}
	return nil
}

// Diff lists the image changes from before to after, sorted, and the
// services whose annotations changed or that appeared or went.
func Diff(before, after map[string]Workload) (updates []Update, other []string) {
	ids := map[string]bool{}
	for id := range before {
		ids[id] = true
	}
	for id := range after {
		ids[id] = true
	}
	for id := range ids {
		b, inB := before[id]
		a, inA := after[id]
		if !inA || !inB {
			other = append(other, id+" (added or removed)")
			continue
		}
		cs := map[string]bool{}
		for c := range b.Images {
			cs[c] = true
		}
		for c := range a.Images {
			cs[c] = true
		}
		for c := range cs {
			if b.Marked[c] || a.Marked[c] {
				continue // its policy's field: counted there
			}
			if b.Images[c] != a.Images[c] {
				updates = append(updates, Update{Service: id, Container: c, From: b.Images[c], To: a.Images[c]})
			}
		}
		if !sameMap(b.Annotations, a.Annotations) {
			other = append(other, id+" (annotations)")
		}
		for f, bl := range b.Kept {
			if al, ok := a.Kept[f]; ok && al != bl {
				other = append(other, fmt.Sprintf("%s (the text of %s beside its value: %q, was %q)", id, f, al, bl))
			}
		}
	}
	sortUpdates(updates)
	sort.Strings(other)
	return updates, other
}

func sameMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func sortUpdates(us []Update) {
	sort.Slice(us, func(i, j int) bool {
		if us[i].Service != us[j].Service {
			return us[i].Service < us[j].Service
		}
		return us[i].Container < us[j].Container
	})
}
