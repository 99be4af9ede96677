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

// Workload is one service as a commit defines it.
type Workload struct {
	// Images maps a container's name to its image.
	Images map[string]string
	// Annotations are the workload's own (metadata.annotations).
	Annotations map[string]string
}

// Locked reports whether fluxd must not release the workload.
func (w Workload) Locked() bool { return w.Annotations["fluxd.io/locked"] == "true" }

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
	// Cluster maps a service ID to its containers' images in the cluster;
	// nil skips the cluster half of (e).
	Cluster map[string]map[string]string
}

// ParseWorkloads reads the Deployments among files (YAML, several
// documents each) into workloads by service ID.
func ParseWorkloads(files map[string][]byte) (map[string]Workload, error) {
	out := map[string]Workload{}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		dec := yaml.NewDecoder(bytes.NewReader(files[name]))
		for {
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
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("parsing %s: %w", name, err)
			}
			if doc.Kind != "Deployment" {
				continue
			}
			ns := doc.Metadata.Namespace
			if ns == "" {
				ns = "default"
			}
			w := Workload{Images: map[string]string{}, Annotations: doc.Metadata.Annotations}
			if w.Annotations == nil {
				w.Annotations = map[string]string{}
			}
			for _, c := range doc.Spec.Template.Spec.Containers {
				w.Images[c.Name] = c.Image
			}
			out[ns+":deployment/"+doc.Metadata.Name] = w
		}
	}
	return out, nil
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
			if b.Images[c] != a.Images[c] {
				updates = append(updates, Update{Service: id, Container: c, From: b.Images[c], To: a.Images[c]})
			}
		}
		if !sameMap(b.Annotations, a.Annotations) {
			other = append(other, id+" (annotations)")
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
