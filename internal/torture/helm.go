package torture

import (
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// HelmContainer is the name fluxd gives the image at the top of a
// HelmRelease's values (Flux v1's helm-operator's name).
const HelmContainer = "chart-image"

// readHelmRelease reads a Flux v2 HelmRelease (helm.toolkit.fluxcd.io)
// whose values hold the image as image: {repository, tag}, the form the
// run uses, into its service, NS:helmrelease/NAME: one container,
// chart-image, and its values block with the two values masked as what
// a release must keep. ok is false for any other document.
func readHelmRelease(file string, lines []string, root *yaml.Node) (id string, w Workload, ok bool, err error) {
	var obj struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name        string            `yaml:"name"`
			Namespace   string            `yaml:"namespace"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
	}
	if err := root.Decode(&obj); err != nil {
		return "", Workload{}, false, fmt.Errorf("parsing %s: %w", file, err)
	}
	if obj.Kind != "HelmRelease" || !strings.HasPrefix(obj.APIVersion, "helm.toolkit.fluxcd.io/") {
		return "", Workload{}, false, nil
	}
	ns := obj.Metadata.Namespace
	if ns == "" {
		ns = "default"
	}
	w = Workload{Images: map[string]string{}, Annotations: obj.Metadata.Annotations}
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	id = ns + ":helmrelease/" + obj.Metadata.Name
	key, values := mapEntry(mapEntryValue(root, "spec"), "values")
	repo := mapEntryValue(mapEntryValue(values, "image"), "repository")
	tag := mapEntryValue(mapEntryValue(values, "image"), "tag")
	if repo == nil || tag == nil || repo.Kind != yaml.ScalarNode || tag.Kind != yaml.ScalarNode {
		return id, w, true, nil // no image the run's form holds
	}
	w.Images[HelmContainer] = repo.Value + ":" + tag.Value
	last := lastLine(values)
	if key.Line < 1 || last > len(lines) {
		return "", Workload{}, false, fmt.Errorf("%s: the values of %s run out of the file", file, id)
	}
	block := append([]string(nil), lines[key.Line-1:last]...)
	for _, n := range []*yaml.Node{repo, tag} {
		block[n.Line-key.Line] = maskValue(block[n.Line-key.Line], n.Column-1)
	}
	w.Kept = map[string]string{HelmContainer: strings.Join(block, "\n")}
	return id, w, true, nil
}

// mapEntry is the key and value nodes of key in mapping n, or nils.
func mapEntry(n *yaml.Node, key string) (k, v *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], n.Content[i+1]
		}
	}
	return nil, nil
}

func mapEntryValue(n *yaml.Node, key string) *yaml.Node {
	_, v := mapEntry(n, key)
	return v
}

// lastLine is the last line that n or a node under it starts on.
func lastLine(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	l := n.Line
	for _, c := range n.Content {
		if cl := lastLine(c); cl > l {
			l = cl
		}
	}
	return l
}
