package torture

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// The model's reading of Flux v2 image automation, written apart from
// fluxd's (gitrepo) so that the checks do not share its mistakes. It
// knows what the run's repository holds: an ImagePolicy is a service,
// NS:imagepolicy/NAME; its containers are the fields marked
// `# {"$imagepolicy": "NS:NAME"}` (the whole image) or
// `# {"$imagepolicy": "NS:NAME:tag"}` (the tag of its ImageRepository's
// image), named FILE:KIND/NAME:PATH as fluxd names them. It does not
// judge which ImageUpdateAutomation covers a field: the run's covers
// every file.

var markerComment = regexp.MustCompile(`\{"\$imagepolicy":\s*"([^"]+)"\}`)

// setter is one marked field.
type setter struct {
	field, value, line string
	policy             string // NS/NAME
	tagOnly            bool
	holders            []string // the Deployments holding it (each build of it)
}

type fluxV2 struct {
	policies map[string]Workload // by NS/NAME, Images still empty
	repoOf   map[string]string   // policy NS/NAME → its ImageRepository NS/NAME
	repos    map[string]string   // ImageRepository NS/NAME → spec.image
	setters  []setter
}

func newFluxV2() *fluxV2 {
	return &fluxV2{policies: map[string]Workload{}, repoOf: map[string]string{}, repos: map[string]string{}}
}

// read adds the object and the marked fields of one object (root, a
// document or a List's item, of file, whose text is lines); holders are
// its service IDs when it is a workload (one for each build of it).
func (v *fluxV2) read(file string, lines []string, root *yaml.Node, holders []string) error {
	var obj struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name        string            `yaml:"name"`
			Namespace   string            `yaml:"namespace"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
		Spec struct {
			Image              string `yaml:"image"`
			ImageRepositoryRef struct {
				Name string `yaml:"name"`
			} `yaml:"imageRepositoryRef"`
		} `yaml:"spec"`
	}
	if err := root.Decode(&obj); err != nil {
		return fmt.Errorf("parsing %s: %w", file, err)
	}
	ns := obj.Metadata.Namespace
	if ns == "" {
		ns = "default"
	}
	if strings.HasPrefix(obj.APIVersion, "image.toolkit.fluxcd.io/") {
		key := ns + "/" + obj.Metadata.Name
		switch obj.Kind {
		case "ImagePolicy":
			w := Workload{Images: map[string]string{}, Annotations: obj.Metadata.Annotations, Kept: map[string]string{}}
			if w.Annotations == nil {
				w.Annotations = map[string]string{}
			}
			v.policies[key] = w
			v.repoOf[key] = ns + "/" + obj.Spec.ImageRepositoryRef.Name
		case "ImageRepository":
			v.repos[key] = obj.Spec.Image
		}
		return nil
	}
	name := obj.Kind
	if name == "" && isKustomization(file) {
		name = "Kustomization"
	}
	if obj.Metadata.Name != "" {
		name += "/" + ns + "/" + obj.Metadata.Name // as fluxd names a field: with its object's namespace
	}
	return walkMarked(root, nil, func(n *yaml.Node, path []any) error {
		m := markerComment.FindStringSubmatch(n.LineComment)
		if m == nil {
			return nil
		}
		parts := strings.Split(m[1], ":")
		if len(parts) < 2 || len(parts) > 3 || len(parts) == 3 && parts[2] != "tag" {
			return nil // :name and :digest are not in the run
		}
		line, err := maskedLine(lines, n)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		v.setters = append(v.setters, setter{
			field: file + ":" + name + ":" + pathString(path), value: n.Value, line: line,
			policy: parts[0] + "/" + parts[1], tagOnly: len(parts) == 3, holders: holders,
		})
		return nil
	})
}

// services adds each ImagePolicy, with its fields, to ws.
func (v *fluxV2) services(ws map[string]Workload) {
	for key, w := range v.policies {
		ns, name, _ := strings.Cut(key, "/")
		holders := map[string]bool{}
		for _, s := range v.setters {
			if s.policy != key {
				continue
			}
			img := s.value
			if s.tagOnly {
				img = v.repos[v.repoOf[key]] + ":" + s.value
			}
			w.Images[s.field] = img
			w.Kept[s.field] = s.line
			for _, h := range s.holders {
				if !holders[h] {
					holders[h] = true
					w.Holders = append(w.Holders, h)
				}
			}
		}
		sort.Strings(w.Holders)
		ws[ns+":imagepolicy/"+name] = w
	}
}

// walkMarked calls f on every scalar under n (at path) that carries a
// line comment.
func walkMarked(n *yaml.Node, path []any, f func(*yaml.Node, []any) error) error {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := walkMarked(n.Content[i+1], append(path[:len(path):len(path)], n.Content[i].Value), f); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if err := walkMarked(c, append(path[:len(path):len(path)], i), f); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if n.LineComment != "" {
			return f(n, path)
		}
	}
	return nil
}

// pathString writes a path as dotted keys and [index]es, as fluxd names
// a field.
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

// maskedLine is the line of the marked scalar n with its value's bytes
// replaced by "…", its quotes kept: everything a setter's edit must
// leave as it was.
func maskedLine(lines []string, n *yaml.Node) (string, error) {
	if n.Line < 1 || n.Line > len(lines) {
		return "", fmt.Errorf("line %d: out of the file", n.Line)
	}
	raw := lines[n.Line-1]
	if at := strings.Index(raw, `{"$imagepolicy"`); at < 0 || n.Column-1 > at {
		return "", fmt.Errorf("line %d: the marked value is not on its marker's line", n.Line)
	}
	return maskValue(raw, n.Column-1), nil
}

// maskValue is line with the scalar that starts at byte start replaced
// by "…", its quotes kept: the value runs to the comment on the line, or
// to its end, less the spaces before either.
func maskValue(line string, start int) string {
	if start < 0 || start > len(line) {
		return line
	}
	end := len(line)
	if hash := strings.Index(line[start:], "#"); hash >= 0 {
		end = start + hash
	}
	end = start + len(strings.TrimRight(line[start:end], " \t"))
	q := ""
	if v := line[start:end]; v != "" && (v[0] == '"' || v[0] == '\'') {
		q = v[:1]
	}
	return line[:start] + q + "…" + q + line[end:]
}

// markedContainers are the indexes of a Deployment's containers whose
// image field carries a $imagepolicy marker (obj: the Deployment's
// mapping).
func markedContainers(obj *yaml.Node) []int {
	var out []int
	_ = walkMarked(obj, nil, func(n *yaml.Node, path []any) error {
		if len(path) < 2 {
			return nil
		}
		if i, ok := path[len(path)-2].(int); ok && len(path) == 6 && pathString(path[:4]) == "spec.template.spec.containers" && path[5] == "image" && markerComment.MatchString(n.LineComment) {
			out = append(out, i)
		}
		return nil
	})
	return out
}
