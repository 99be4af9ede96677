package deploy

import (
	"bytes"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/fluxd/fluxd/internal/giturl"
)

type object struct {
	Kind     string
	Metadata struct{ Name, Namespace string }
	Subjects []struct{ Namespace string }
	Spec     struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Name, Image string
					Args        []string
				}
			}
		}
	}
	Data map[string]string `yaml:"data"`
}

func decodeAll(t *testing.T, b []byte) []object {
	t.Helper()
	var out []object
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o object
		if err := dec.Decode(&o); err != nil {
			break
		}
		out = append(out, o)
	}
	return out
}

func TestRenderCustomises(t *testing.T) {
	b, err := Render(Options{Namespace: "gitops", Watch: []string{"apps", "web"}, GitURL: "ssh://git@git.example/org/manifests.git", GitBranch: "prod", GitPaths: []string{"clusters/a"}, Image: "reg.example/fluxd:v1"})
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, b)
	base, _ := Render(Options{})
	if n := len(decodeAll(t, base)); n < 10 {
		t.Fatalf("the base renders %d objects", n)
	}
	bindings := map[string]int{}
	var dep *object
	for i, o := range objs {
		if o.Metadata.Namespace == "fluxd" || o.Metadata.Namespace == "default" || (o.Kind == "Namespace" && o.Metadata.Name == "fluxd") {
			t.Errorf("%s %s left in the base's namespace %q", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
		}
		for _, s := range o.Subjects {
			if s.Namespace != "gitops" {
				t.Errorf("%s %s binds a subject in %q", o.Kind, o.Metadata.Name, s.Namespace)
			}
		}
		if o.Kind == "RoleBinding" && o.Metadata.Namespace != "gitops" {
			bindings[o.Metadata.Namespace]++
		}
		if o.Kind == "Deployment" {
			dep = &objs[i]
		}
	}
	if bindings["apps"] == 0 || bindings["apps"] != bindings["web"] {
		t.Errorf("RoleBindings per watched namespace: %v; want the same in apps and web", bindings)
	}
	if dep == nil || len(dep.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("no Deployment")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	if c.Image != "reg.example/fluxd:v1" || !strings.Contains(args, "--namespaces=apps,web") || !strings.Contains(args, "--git-branch=prod") || !strings.Contains(args, "--git-path=clusters/a") || strings.Contains(args, "--namespaces=default") {
		t.Errorf("fluxd container: image %s, args %s", c.Image, args)
	}
	last := objs[len(objs)-1]
	if last.Kind != "Secret" || last.Metadata.Name != "fluxd-git" || last.Metadata.Namespace != "gitops" || last.Data["url"] != base64.StdEncoding.EncodeToString([]byte("ssh://git@git.example/org/manifests.git")) {
		t.Errorf("git Secret: %+v", last)
	}
}

func TestRenderRefusesBadNames(t *testing.T) {
	for _, o := range []Options{{Namespace: "Bad_NS"}, {Watch: []string{"ok", "-no"}}, {GitURL: "https://x\nkind: Pod"}} {
		if _, err := Render(o); err == nil {
			t.Errorf("Render(%+v) accepted", o)
		}
	}
}

// Review findings: an SSH remote gets the mounted key and known_hosts; an
// empty watched namespace is refused; a watched namespace named like the
// base's own keeps its objects; a value's $ is not expanded by the
// kubelet; an existing namespace can be installed into as it is.
func TestRenderEdges(t *testing.T) {
	b, err := Render(Options{GitURL: "git@github.com:org/manifests.git", GitBranch: "$(GIT_URL)"})
	if err != nil {
		t.Fatal(err)
	}
	var args string
	for _, o := range decodeAll(t, b) {
		if o.Kind == "Deployment" {
			args = strings.Join(o.Spec.Template.Spec.Containers[0].Args, " ")
		}
	}
	for _, want := range []string{"--git-ssh-key-secret=fluxd-ssh", "--git-ssh-known-hosts-file=/etc/fluxd/known_hosts/known_hosts", "--git-branch=$$(GIT_URL)"} {
		if !strings.Contains(args, want) {
			t.Errorf("args lack %q: %s", want, args)
		}
	}
	if _, err := Render(Options{Watch: []string{"a", "", "b"}}); err == nil {
		t.Error("an empty watched namespace was accepted")
	}
	b, err = Render(Options{Namespace: "gitops", Watch: []string{"fluxd"}, NoNamespace: true})
	if err != nil {
		t.Fatal(err)
	}
	inFluxd := 0
	for _, o := range decodeAll(t, b) {
		if o.Kind == "Namespace" {
			t.Errorf("NoNamespace rendered a Namespace %s", o.Metadata.Name)
		}
		if o.Kind == "RoleBinding" && o.Metadata.Name == "fluxd-workloads-gitops" && o.Metadata.Namespace == "fluxd" {
			inFluxd++
		}
	}
	if inFluxd != 1 {
		t.Errorf("the watched namespace fluxd has %d fluxd-workloads RoleBindings; want 1", inFluxd)
	}
}

// The probes ask the plaintext health listener, which the container's
// args turn on at the port the probes name: TLS on the API leaves them
// working.
func TestProbesUseTheHealthListener(t *testing.T) {
	b, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		HTTPGet *struct{ Path, Port string } `yaml:"httpGet"`
	}
	var dep struct {
		Kind string
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args  []string
						Ports []struct {
							Name          string
							ContainerPort int `yaml:"containerPort"`
						}
						ReadinessProbe probe `yaml:"readinessProbe"`
						LivenessProbe  probe `yaml:"livenessProbe"`
					}
				}
			}
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for dep.Kind != "Deployment" {
		if err := dec.Decode(&dep); err != nil {
			t.Fatalf("no Deployment: %v", err)
		}
	}
	c := dep.Spec.Template.Spec.Containers[0]
	port := 0
	for _, p := range c.Ports {
		if p.Name == "health" {
			port = p.ContainerPort
		}
	}
	if port == 0 || !slices.Contains(c.Args, "--health-listen=0.0.0.0:"+strconv.Itoa(port)) {
		t.Errorf("the health port %d and --health-listen do not agree: %v", port, c.Args)
	}
	for name, p := range map[string]probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port != "health" {
			t.Errorf("the probe of %s: %+v, want an httpGet of %s on the port health", name, p.HTTPGet, name)
		}
	}
}

// 'fluxctl install' gives the SSH flags to exactly the URLs fluxd reaches
// over SSH (the table go-git's parser is checked against in gitrepo/gogit).
func TestRenderSSHFlagsFollowFluxdsURLRules(t *testing.T) {
	t.Parallel()
	for url, ssh := range giturl.Cases {
		if url == "" {
			continue
		}
		out, err := Render(Options{GitURL: url})
		if err != nil {
			t.Fatalf("Render(%q): %v", url, err)
		}
		if got := strings.Contains(string(out), "- --git-ssh-key-secret=fluxd-ssh"); got != ssh {
			t.Errorf("Render(%q) gives the SSH flags: %v; fluxd reads it as SSH: %v", url, got, ssh)
		}
	}
}

// --replicas 2 renders deploy/ha's changes: leader election, a rolling
// update, the shared PostgreSQL database from the named Secret; more than
// one replica without a database is refused.
func TestRenderHA(t *testing.T) {
	t.Parallel()
	out, err := Render(Options{Replicas: 2, HistoryDBSecret: "fluxd-pg"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replicas: 2", "type: RollingUpdate", "- --leader-elect", "- --history-db=$(HISTORY_DB)",
		"- --history-db-password-file=/etc/fluxd/history-db/password", "secretName: fluxd-pg", "name: fluxd-pg"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the HA render lacks %q", want)
		}
	}
	base, err := Render(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replicas: 1", "type: Recreate"} {
		if !strings.Contains(string(base), want) {
			t.Errorf("the base render lacks %q", want)
		}
	}
	if strings.Contains(string(base), "- --leader-elect") {
		t.Error("the one-replica base runs --leader-elect")
	}
	if _, err := Render(Options{Replicas: 2}); err == nil || !strings.Contains(err.Error(), "--history-db-secret") {
		t.Errorf("two replicas without a database: %v; want a refusal naming --history-db-secret", err)
	}
}

// Two installs watching one namespace (fluxd in "team-a" and in
// "team-b", both watching "apps") put bindings of their own names there,
// so that applying one does not overwrite the other's subjects.
func TestRenderTwoInstallsWatchingOneNamespace(t *testing.T) {
	t.Parallel()
	names := func(ns string) map[string]string {
		b, err := Render(Options{Namespace: ns, Watch: []string{"apps"}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, o := range decodeAll(t, b) {
			if o.Metadata.Namespace == "apps" {
				out[o.Kind+"/"+o.Metadata.Name] = ns
			}
		}
		return out
	}
	a, b := names("team-a"), names("team-b")
	if len(a) == 0 {
		t.Fatal("no objects in the watched namespace")
	}
	for k := range a {
		if _, clash := b[k]; clash {
			t.Errorf("both installs write %s in the watched namespace", k)
		}
	}
	if _, ok := a["RoleBinding/fluxd-workloads-team-a"]; !ok {
		t.Errorf("the workloads RoleBinding is not named after fluxd's namespace: %v", a)
	}
}

// With an SSH remote, the known_hosts ConfigMap is required: a missing
// one keeps the pod waiting with the kubelet's event naming it, instead
// of fluxd crash-looping on a missing file. Over HTTPS it stays optional.
func TestRenderSSHRequiresKnownHosts(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{"git@host:org/r.git": "optional: false", "https://host/r.git": "optional: true"} {
		b, err := Render(Options{GitURL: url})
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		i := strings.Index(s, "name: fluxd-known-hosts")
		if i < 0 || !strings.Contains(s[i:min(len(s), i+80)], want) {
			t.Errorf("%s: the known-hosts volume is not %q:\n%s", url, want, s[max(0, i-100):min(len(s), i+100)])
		}
	}
}
