package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The Helm chart (chart/fluxd) and 'fluxctl install' render one source of
// truth, the base's files above, so that the two cannot drift apart:
//   - the chart's templates are generated here from those files: each
//     object as the base has it, with Helm's expressions in the places
//     Render customises (namespaces, image, arguments, the HA and SSH
//     additions, from the same constants Render uses);
//   - only the chart's frame is written by hand (Chart.yaml, values.yaml,
//     templates/_helpers.tpl with the values' checks, NOTES.txt);
//   - TestChartIsGenerated fails when the checked-in templates are not
//     what this generates ('make generate' writes them), so an edit of
//     the base that is not regenerated, or a hand edit of a template,
//     fails CI;
//   - TestChartMatchesInstall renders the chart with Helm's own engine
//     and Render with the same options (a table and seeded random ones)
//     and compares the objects, so that the two customisations (Go here,
//     Helm's templates there) agree.
//
// Why not have Render run the chart through Helm's engine instead (one
// customisation): Helm's engine imports client-go, and fluxctl, which
// calls Render, must not (TestFluxctlImportsNoBackends). Why not hand-written
// templates kept equal by the comparison alone: a manifest edit would
// then be made twice, by hand; generated, it is made once.

// ChartDir is the chart's directory, relative to this package's.
const ChartDir = "chart/fluxd"

// The chart's objects differ from Render's in one way, on purpose: Helm
// keeps the deploy key Secret when the release is uninstalled, so that
// installing it again reuses the key the git host knows.
const (
	keepAnnotation = "helm.sh/resource-policy"
	keepValue      = "keep"
)

// Placeholders put into the base's objects where a template expression or
// block goes; replaced in the encoded text (sentinels).
const (
	phNamespace = "__FLUXD_NAMESPACE__"
	phWatched   = "__FLUXD_WATCHED__"
	phImage     = "__FLUXD_IMAGE__"
	phReplicas  = "__FLUXD_REPLICAS__"
	phStrategy  = "__FLUXD_STRATEGY__"
	phArgs      = "__FLUXD_ARGS__"
	phEnv       = "__FLUXD_ENV__"
	phMounts    = "__FLUXD_MOUNTS__"
	phVolumes   = "__FLUXD_VOLUMES__"
	phPod       = "__FLUXD_POD__"
	phKnownOpt  = "__FLUXD_KNOWN_HOSTS_OPTIONAL__"
	phCluster   = "__FLUXD_CLUSTER_ROLE__"
)

// baseClusterRole is the base's one cluster-wide object. Helm owns an
// object for one release only, so a second release in a cluster (fluxd
// in another namespace) needs a name of its own: the chart's value
// clusterRoleName, by default this.
const baseClusterRole = "fluxd-workloads"

// preamble starts every generated template: the values' checks (one
// message listing every problem) and the variables the objects use.
const preamble = `{{- include "fluxd.validate" . }}
{{- $watch := .Values.watchNamespaces | default (list "default") }}
{{- $ssh := eq (include "fluxd.gitSSH" .) "true" }}
{{- $ha := gt (int .Values.replicas) 1 }}
{{- $db := or $ha (ne (toString (.Values.historyDBSecret | default "")) "") }}
`

// ChartTemplates returns the chart's generated templates, by file name
// under templates/.
func ChartTemplates() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, f := range order {
		b, err := files.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var t bytes.Buffer
		fmt.Fprintf(&t, "# Generated from deploy/%s by 'make generate' (deploy/chart.go):\n# edit deploy/%s, not this file.\n", f, f)
		t.WriteString(preamble)
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var d yaml.Node
			if err := dec.Decode(&d); err != nil {
				break
			}
			if len(d.Content) == 0 {
				continue
			}
			text, err := chartObject(&d)
			if err != nil {
				return nil, fmt.Errorf("deploy/%s: %w", f, err)
			}
			t.WriteString(text)
		}
		out[f] = t.Bytes()
	}
	git, err := chartGitSecret()
	if err != nil {
		return nil, err
	}
	out["git-secret.yaml"] = git
	return out, nil
}

// WriteChart writes the generated templates into the chart under dir
// (this package's directory).
func WriteChart(dir string) error {
	ts, err := ChartTemplates()
	if err != nil {
		return err
	}
	for name, b := range ts {
		if err := os.WriteFile(filepath.Join(dir, ChartDir, "templates", name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// chartObject turns one of the base's documents into template text: the
// document, preceded by its separator, in a range over the watched
// namespaces or a condition where Render repeats or drops it.
func chartObject(doc *yaml.Node) (string, error) {
	obj := doc.Content[0]
	kind := get(obj, "kind")
	watched := get(obj, "metadata", "namespace") == baseWatched
	if watched {
		set(obj, phWatched, "metadata", "namespace")
		suffix := "-" + baseNamespace
		if n := get(obj, "metadata", "name"); strings.HasSuffix(n, suffix) {
			set(obj, strings.TrimSuffix(n, suffix)+"-"+phNamespace, "metadata", "name")
		}
		if get(obj, "roleRef", "kind") == "Role" {
			if n := get(obj, "roleRef", "name"); strings.HasSuffix(n, suffix) {
				set(obj, strings.TrimSuffix(n, suffix)+"-"+phNamespace, "roleRef", "name")
			}
		}
	} else if get(obj, "metadata", "namespace") == baseNamespace {
		set(obj, phNamespace, "metadata", "namespace")
	}
	if kind == "ClusterRole" {
		if n := get(obj, "metadata", "name"); n != baseClusterRole {
			return "", fmt.Errorf("a ClusterRole %q: the chart names only %q after its value clusterRoleName (chart.go)", n, baseClusterRole)
		}
		set(obj, phCluster, "metadata", "name")
	}
	if get(obj, "roleRef", "kind") == "ClusterRole" && get(obj, "roleRef", "name") == baseClusterRole {
		set(obj, phCluster, "roleRef", "name")
	}
	if kind == "Namespace" && get(obj, "metadata", "name") == baseNamespace {
		set(obj, phNamespace, "metadata", "name")
	}
	if subjects := lookup(obj, "subjects"); subjects != nil {
		for _, s := range subjects.Content {
			if get(s, "namespace") == baseNamespace {
				set(s, phNamespace, "namespace")
			}
		}
	}
	if kind == "Secret" && get(obj, "metadata", "name") == "fluxd-ssh" {
		meta := lookup(obj, "metadata")
		meta.Content = append(meta.Content, parseYAML("annotations"), parseYAML(fmt.Sprintf("{%q: %q}", keepAnnotation, keepValue)))
	}
	var strategy string
	if kind == "Deployment" {
		var err error
		if strategy, err = chartDeployment(obj); err != nil {
			return "", err
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return "", err
	}
	if err := enc.Close(); err != nil {
		return "", err
	}
	text, err := expand(b.String(), strategy)
	if err != nil {
		return "", err
	}
	switch {
	case watched:
		return "{{- range $watchNS := $watch }}\n---\n" + text + "{{- end }}\n", nil
	case kind == "Namespace":
		return "{{- if .Values.createNamespace }}\n---\n" + text + "{{- end }}\n", nil
	}
	return "---\n" + text, nil
}

// chartDeployment puts placeholders where Render sets the image, the
// replicas, the strategy and the arguments, and adds the HA and SSH
// changes, and the chart's own pod settings. It returns the base's
// strategy, in flow style, for the template to use with one replica.
func chartDeployment(obj *yaml.Node) (string, error) {
	pod := lookup(obj, "spec", "template", "spec")
	if pod == nil {
		return "", fmt.Errorf("the Deployment has no pod template")
	}
	set(obj, phReplicas, "spec", "replicas")
	st := lookup(obj, "spec", "strategy")
	if st == nil {
		return "", fmt.Errorf("the Deployment has no strategy")
	}
	flow := clone(st)
	flow.Style = yaml.FlowStyle
	base, err := yaml.Marshal(flow)
	if err != nil {
		return "", err
	}
	*st = yaml.Node{Kind: yaml.ScalarNode, Value: phStrategy}
	pod.Content = append(pod.Content, parseYAML(phPod), parseYAML("x"))
	appendYAML(lookup(pod, "volumes"), phVolumes)
	for _, v := range lookup(pod, "volumes").Content {
		if get(v, "name") == "known-hosts" {
			set(v, phKnownOpt, "configMap", "optional")
		}
	}
	containers := lookup(pod, "containers")
	found := false
	for _, c := range containers.Content {
		if get(c, "name") != "fluxd" {
			continue
		}
		found = true
		set(c, phImage, "image")
		args := lookup(c, "args")
		var kept []*yaml.Node
		for _, a := range args.Content {
			if !customisedArg(a.Value) {
				kept = append(kept, a)
			}
		}
		args.Content = append(kept, parseYAML(phArgs))
		appendYAML(lookup(c, "env"), phEnv)
		appendYAML(lookup(c, "volumeMounts"), phMounts)
	}
	if !found {
		return "", fmt.Errorf("the Deployment has no container fluxd")
	}
	return strings.TrimSpace(string(base)), nil
}

// expand replaces the placeholders of one encoded object with template
// expressions, and the lines that hold a block's placeholder with the
// block, at that line's indentation.
// baseStrategy is the base Deployment's strategy, in flow style.
func expand(text, baseStrategy string) (string, error) {
	inline := strings.NewReplacer(
		phNamespace, "{{ $.Release.Namespace }}",
		phWatched, "{{ $watchNS }}",
		phImage, "{{ $.Values.image | quote }}",
		phReplicas, "{{ int $.Values.replicas }}",
		phKnownOpt, "{{ not $ssh }}",
		phCluster, fmt.Sprintf("{{ $.Values.clusterRoleName | default %q }}", baseClusterRole),
	)
	var out strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		trimmed := strings.TrimSpace(line)
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		var block []string
		switch trimmed {
		case "- " + phArgs:
			block = argsBlock()
		case "- " + phEnv:
			block = ifBlock("$db", "- "+fmt.Sprintf(dbEnv, "{{ $.Values.historyDBSecret | quote }}"))
		case "- " + phMounts:
			block = ifBlock("$db", "- "+dbMount)
		case "- " + phVolumes:
			block = ifBlock("$db", "- "+fmt.Sprintf(dbVolume, "{{ $.Values.historyDBSecret | quote }}"))
		case phPod + ": x":
			block = podBlock(len(indent))
		case "strategy: " + phStrategy:
			block = []string{"strategy:",
				"  {{- if $ha }}", "  " + haStrategy,
				"  {{- else }}", "  " + baseStrategy,
				"  {{- end }}"}
		default:
			line = inline.Replace(line)
			if strings.Contains(line, "__FLUXD_") {
				return "", fmt.Errorf("a placeholder left in %q", line)
			}
			out.WriteString(line)
			continue
		}
		for _, l := range block {
			out.WriteString(indent + l + "\n")
		}
	}
	return out.String(), nil
}

// argsBlock is what Render adds to fluxd's arguments. A value's own $ is
// doubled: the kubelet expands $(VAR) in args.
func argsBlock() []string {
	arg := func(expr string) string { return "- {{ " + expr + ` | replace "$" "$$" | quote }}` }
	quoted := func(ss ...string) []string {
		var out []string
		for _, s := range ss {
			out = append(out, "- "+strconv.Quote(s))
		}
		return out
	}
	b := []string{arg(`printf "--namespaces=%s" (join "," $watch)`)}
	b = append(b, "{{- with $.Values.git.branch }}", arg(`printf "--git-branch=%s" .`), "{{- end }}")
	b = append(b, "{{- range $.Values.git.paths }}", arg(`printf "--git-path=%s" .`), "{{- end }}")
	b = append(b, ifBlock("$ssh", quoted(sshArgs...)...)...)
	b = append(b, ifBlock("$db", quoted(dbArgs...)...)...)
	b = append(b, ifBlock("$ha", quoted(leaderElectArg)...)...)
	// The chart's own: flags 'fluxctl install' has no option for (a
	// kustomize overlay patches them in).
	b = append(b, "{{- range $.Values.extraArgs }}", "- {{ . | quote }}", "{{- end }}")
	return b
}

// podBlock is the chart's own pod settings, which 'fluxctl install' has
// no option for (an overlay patches them in). indent is the block's.
func podBlock(indent int) []string {
	var b []string
	for _, k := range []string{"nodeSelector", "tolerations"} {
		b = append(b, "{{- with $.Values."+k+" }}", k+":", fmt.Sprintf("  {{- toYaml . | nindent %d }}", indent+2), "{{- end }}")
	}
	return b
}

func ifBlock(cond string, lines ...string) []string {
	return append(append([]string{"{{- if " + cond + " }}"}, lines...), "{{- end }}")
}

// chartGitSecret is Render's Secret fluxd-git, holding git.url.
func chartGitSecret() ([]byte, error) {
	s := fmt.Sprintf(gitSecret, phNamespace, "{{ $.Values.git.url | b64enc }}")
	text, err := expand(s, "")
	if err != nil {
		return nil, err
	}
	return []byte("# Generated from deploy/render.go's Secret fluxd-git by 'make generate'\n# (deploy/chart.go): the remote, with whatever token it holds.\n" + preamble + "---\n" + text), nil
}
