// Package deploy holds fluxd's install manifests, a kustomize base
// (kubectl apply -k deploy), and renders them customised for
// 'fluxctl install': fluxd's namespace, the namespaces it watches, the
// git remote and the image, as Flux v1's fluxctl install did.
package deploy

import (
	"bytes"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/internal/giturl"
)

//go:embed namespace.yaml rbac.yaml deploykey.yaml deployment.yaml service.yaml pdb.yaml networkpolicy.yaml
var files embed.FS

// order is the kustomization's.
var order = []string{"namespace.yaml", "rbac.yaml", "deploykey.yaml", "deployment.yaml", "service.yaml", "pdb.yaml", "networkpolicy.yaml"}

// The base's own names, replaced when rendering.
const (
	baseNamespace = "fluxd"
	baseWatched   = "default"
	baseImage     = "fluxd:latest"
)

// What the install adds for an SSH remote, and for replicas on a shared
// database (as deploy/ha does). The chart's templates (chart.go) are
// generated from these too, so that the two add the same.
var (
	sshArgs = []string{"--git-ssh-key-secret=fluxd-ssh", "--git-ssh-known-hosts-file=/etc/fluxd/known_hosts/known_hosts"}
	// $(...) is the kubelet's expansion, not doubled.
	dbArgs = []string{"--history-db=$(HISTORY_DB)", "--history-db-password-file=/etc/fluxd/history-db/password"}
)

const (
	leaderElectArg = "--leader-elect"
	haStrategy     = "{type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}"
	// The %s of these three is the Secret Options.HistoryDBSecret names.
	dbEnv    = "{name: HISTORY_DB, valueFrom: {secretKeyRef: {name: %s, key: url}}}"
	dbMount  = "{name: history-db, mountPath: /etc/fluxd/history-db, readOnly: true}"
	dbVolume = "{name: history-db, secret: {secretName: %s, defaultMode: 0440, items: [{key: password, path: password}]}}"
	// gitSecret holds --git-url: namespace %s, url %s (base64).
	// data, not stringData: the API server stores only data, so a
	// stringData Secret reads as "configured" on every re-apply.
	gitSecret = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: fluxd-git\n  namespace: %s\ntype: Opaque\ndata:\n  url: %s\n"
)

// Options customise the install.
type Options struct {
	// Namespace is fluxd's own; default "fluxd".
	Namespace string
	// Watch are the namespaces whose workloads fluxd releases; default
	// "default". Each gets the RoleBindings (and pull-secret Role) the
	// base gives "default".
	Watch []string
	// GitURL, when set, is written into the Secret fluxd-git that the
	// Deployment reads it from (with whatever token it holds: the output
	// is then a secret too).
	GitURL    string
	GitBranch string
	GitPaths  []string
	// Image is fluxd's image; default "fluxd:latest" (build one with make
	// image).
	Image string
	// NoNamespace leaves the Namespace object out, for installing into a
	// namespace that exists (whose Pod Security labels are then its own).
	NoNamespace bool
	// Replicas above 1 render the HA variant (deploy/ha): that many
	// replicas with --leader-elect, a rolling update, and the PostgreSQL
	// database of the Secret HistoryDBSecret (keys "url", a postgres://
	// URL without password, and "password"), which they must share.
	// Default 1: SQLite in the pod, the Recreate strategy.
	Replicas        int
	HistoryDBSecret string
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	if strings.Contains(o.GitURL, "\n") {
		errs = append(errs, errors.New("--git-url holds a line break"))
	}
	if o.Namespace != "" && !dns1123(o.Namespace) {
		errs = append(errs, fmt.Errorf("%q is not a namespace name (lower-case letters, digits and '-', at most 63)", o.Namespace))
	}
	for _, ns := range o.Watch {
		if !dns1123(ns) { // an empty one would land in kubectl's current namespace
			errs = append(errs, fmt.Errorf("%q is not a namespace name (lower-case letters, digits and '-', at most 63)", ns))
		}
	}
	if o.Replicas < 0 {
		errs = append(errs, errors.New("--replicas must be at least 1"))
	}
	if o.Replicas > 1 && o.HistoryDBSecret == "" {
		errs = append(errs, errors.New("--replicas above 1 needs --history-db-secret NAME: the replicas must share a PostgreSQL database (a Secret with keys \"url\", postgres://USER@HOST:PORT/DB?sslmode=..., and \"password\") for a new leader to carry on with the old one's jobs; each replica's own SQLite would lose them"))
	}
	if o.HistoryDBSecret != "" && !dns1123(o.HistoryDBSecret) && !dnsSubdomain(o.HistoryDBSecret) {
		errs = append(errs, fmt.Errorf("--history-db-secret %q is not a Secret name", o.HistoryDBSecret))
	}
	return errors.Join(errs...)
}

// Render returns the install, one YAML stream.
func Render(o Options) ([]byte, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Namespace == "" {
		o.Namespace = baseNamespace
	}
	if len(o.Watch) == 0 {
		o.Watch = []string{baseWatched}
	}
	if o.Image == "" {
		o.Image = baseImage
	}
	var docs []*yaml.Node
	watchedDocs := map[*yaml.Node]bool{}
	for _, f := range order {
		b, err := files.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var d yaml.Node
			if err := dec.Decode(&d); err != nil {
				break
			}
			if len(d.Content) == 0 {
				continue
			}
			obj := d.Content[0]
			if get(obj, "metadata", "namespace") == baseWatched {
				for _, ns := range o.Watch {
					c := clone(obj)
					set(c, ns, "metadata", "namespace")
					watchedDocs[c] = true
					docs = append(docs, c)
				}
				continue
			}
			if o.NoNamespace && get(obj, "kind") == "Namespace" {
				continue
			}
			docs = append(docs, obj)
		}
	}
	for _, obj := range docs {
		customise(obj, o, watchedDocs[obj])
	}
	if o.GitURL != "" {
		var s yaml.Node
		secret := fmt.Sprintf(gitSecret, o.Namespace, base64.StdEncoding.EncodeToString([]byte(o.GitURL)))
		if err := yaml.Unmarshal([]byte(secret), &s); err != nil {
			return nil, err
		}
		docs = append(docs, s.Content[0])
	}
	var out bytes.Buffer
	out.WriteString("# fluxd's install, rendered by 'fluxctl install' from deploy/ (kubectl apply -f -)\n")
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// customise moves obj into fluxd's namespace and sets the Deployment's
// image and flags.
func customise(obj *yaml.Node, o Options, watched bool) {
	kind := get(obj, "kind")
	if kind == "Namespace" && get(obj, "metadata", "name") == baseNamespace {
		set(obj, o.Namespace, "metadata", "name")
	}
	// A watched namespace's objects stay where they were put, even in a
	// namespace named like the base's own.
	if !watched && get(obj, "metadata", "namespace") == baseNamespace {
		set(obj, o.Namespace, "metadata", "namespace")
	}
	// Objects in a watched namespace are named after fluxd's namespace,
	// so that two installs watching one namespace keep their own.
	if watched {
		suffix := "-" + baseNamespace
		if n := get(obj, "metadata", "name"); strings.HasSuffix(n, suffix) {
			set(obj, strings.TrimSuffix(n, suffix)+"-"+o.Namespace, "metadata", "name")
		}
		if get(obj, "roleRef", "kind") == "Role" {
			if n := get(obj, "roleRef", "name"); strings.HasSuffix(n, suffix) {
				set(obj, strings.TrimSuffix(n, suffix)+"-"+o.Namespace, "roleRef", "name")
			}
		}
	}
	if subjects := lookup(obj, "subjects"); subjects != nil {
		for _, s := range subjects.Content {
			if get(s, "namespace") == baseNamespace {
				set(s, o.Namespace, "namespace")
			}
		}
	}
	if kind != "Deployment" {
		return
	}
	containers := lookup(obj, "spec", "template", "spec", "containers")
	if containers == nil {
		return
	}
	for _, c := range containers.Content {
		if get(c, "name") != "fluxd" {
			continue
		}
		set(c, o.Image, "image")
		args := lookup(c, "args")
		if args == nil {
			continue
		}
		var kept []*yaml.Node
		for _, a := range args.Content {
			if customisedArg(a.Value) {
				continue
			}
			kept = append(kept, a)
		}
		// The kubelet expands $(VAR) in args: a value's own $ is doubled.
		add := func(v string) {
			kept = append(kept, &yaml.Node{Kind: yaml.ScalarNode, Value: strings.ReplaceAll(v, "$", "$$")})
		}
		add("--namespaces=" + strings.Join(o.Watch, ","))
		if o.GitBranch != "" {
			add("--git-branch=" + o.GitBranch)
		}
		for _, p := range o.GitPaths {
			add("--git-path=" + p)
		}
		if giturl.IsSSH(o.GitURL) {
			// The deploy key Secret the install ships empty (fluxd
			// generates the key into it: one for every replica, printed
			// by 'fluxctl identity') and the known_hosts the base mounts
			// (ConfigMap fluxd-known-hosts): no accept-any host key.
			for _, a := range sshArgs {
				add(a)
			}
			// Required then: without it the pod waits, with the kubelet's
			// event naming the missing ConfigMap, rather than fluxd
			// failing on a missing file and restarting.
			if vols := lookup(obj, "spec", "template", "spec", "volumes"); vols != nil {
				for _, v := range vols.Content {
					if get(v, "name") == "known-hosts" {
						if opt := lookup(v, "configMap", "optional"); opt != nil {
							opt.Value, opt.Tag, opt.Style = "false", "!!bool", 0
						}
					}
				}
			}
		}
		if o.Replicas > 1 || o.HistoryDBSecret != "" {
			// As deploy/ha's patch: the database from the Secret.
			for _, a := range dbArgs {
				kept = append(kept, &yaml.Node{Kind: yaml.ScalarNode, Value: a})
			}
			appendYAML(lookup(c, "env"), fmt.Sprintf(dbEnv, o.HistoryDBSecret))
			appendYAML(lookup(c, "volumeMounts"), dbMount)
			appendYAML(lookup(obj, "spec", "template", "spec", "volumes"), fmt.Sprintf(dbVolume, o.HistoryDBSecret))
		}
		if o.Replicas > 1 {
			kept = append(kept, &yaml.Node{Kind: yaml.ScalarNode, Value: leaderElectArg})
			if r := lookup(obj, "spec", "replicas"); r != nil {
				r.Value, r.Tag, r.Style = fmt.Sprint(o.Replicas), "!!int", 0
			}
			if st := lookup(obj, "spec", "strategy"); st != nil {
				*st = *parseYAML(haStrategy)
			}
		}
		args.Content = kept
	}
}

// customisedArg says whether the base's argument a is one the install
// sets from its options (and so drops from the base's).
func customisedArg(a string) bool {
	for _, p := range []string{"--namespaces=", "--git-branch=", "--git-path=", "--git-ssh-"} {
		if strings.HasPrefix(a, p) {
			return true
		}
	}
	return false
}

// parseYAML parses a snippet of this file's own (it cannot fail on them).
func parseYAML(s string) *yaml.Node {
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(s), &n); err != nil || len(n.Content) == 0 {
		panic(fmt.Sprintf("deploy: a snippet does not parse: %q: %v", s, err))
	}
	return n.Content[0]
}

// appendYAML appends a snippet to a sequence.
func appendYAML(seq *yaml.Node, s string) {
	if seq != nil && seq.Kind == yaml.SequenceNode {
		seq.Content = append(seq.Content, parseYAML(s))
	}
}

func lookup(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

func get(n *yaml.Node, keys ...string) string {
	if v := lookup(n, keys...); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// set sets an existing scalar.
func set(n *yaml.Node, v string, keys ...string) {
	if s := lookup(n, keys...); s != nil && s.Kind == yaml.ScalarNode {
		s.Value, s.Style, s.Tag = v, 0, "!!str"
	}
}

func clone(n *yaml.Node) *yaml.Node {
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = clone(k)
	}
	return &c
}

// dnsSubdomain is a Secret's name: DNS labels joined by dots.
func dnsSubdomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !dns1123(l) {
			return false
		}
	}
	return true
}

func dns1123(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
