package layers

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/fluxd/fluxd/"

// allowed is, per package, the module's packages its non-test code may
// import, as docs/architecture.md draws them: imports run down, from the
// binaries through the edge (web, daemon, webhook) and the loops (automator,
// release/jobs, release, syncer, notify) to the domain (gitrepo,
// platform, registry, history, policy, helmrelease, verify) and the adapters
// below it that only cmd/fluxd wires in. internal/* helpers sit beside
// every layer and import no layer.
//
// Tests may import more (the local stack, the store adapters): only the
// code that ships is held to this.
var allowed = map[string][]string{
	// binaries and tools
	"cmd/fluxd": {"automator", "daemon", "gates", "promotion", "gitrepo", "gitrepo/gogit", "history", "history/store", "internal/auth", "internal/memlimit",
		"internal/tlsfiles", "internal/version", "internal/clientkey", "notify", "platform", "platform/kube", "platform/kube/gitguard",
		"platform/kube/sync", "proto/fluxd/v1", "registry", "registry/oci", "release", "release/jobs", "syncer", "verify", "verify/cosign", "verify/storecache", "web", "webhook"},
	"cmd/fluxctl": {"check", "deploy", "internal/grpcwindow", "internal/tlsfiles", "internal/version", "proto/fluxd/v1"},
	"hack/image":  {},
	"hack/stack":  {"internal/localstack"},
	// hack/e2eshard: make test's runner of the end-to-end shards.
	"hack/e2eshard": {},
	// hack/sign: the signing guide's cosign stand-in (go run ./hack/sign).
	"hack/sign": {"internal/cosigntest"},
	"deploy":    {"internal/giturl"},
	"e2e":       {},
	// gates: promotion's check adapters (http, job, prometheus), beside
	// the binary that wires them into the promotion loop.
	"gates": {"internal/giturl", "promotion"},

	// edge
	"web":    {"history", "internal/auth", "internal/clientkey", "proto/fluxd/v1"},
	"daemon": {"automator", "gitrepo", "gitrepo/format", "history", "internal/auth", "internal/clientkey", "internal/editdistance", "internal/fluxerr", "internal/grpcwindow", "internal/replicacert", "platform", "policy", "promotion", "proto/fluxd/v1", "registry", "release", "release/jobs", "syncer"},
	// webhook is the transport of registry notifications and of CI's
	// approvals; what they do is the daemon's and the promotion loop's,
	// through webhook.Refresher and webhook.Approver, wired by cmd/fluxd.
	"webhook": {"internal/clientkey", "internal/fluxerr", "internal/replicacert", "promotion", "registry"},
	"check":   {"gitrepo", "platform", "policy", "promotion", "registry", "release"},

	// loops
	"promotion":    {"history", "internal/fluxerr", "platform", "release", "release/jobs"},
	"automator":    {"gitrepo", "history", "internal/auth", "platform", "release", "release/jobs"},
	"release/jobs": {"history", "internal/fluxerr", "release"},
	"release":      {"gitrepo", "gitrepo/format", "gitrepo/format/kustomize", "gitrepo/format/setters", "history", "internal/auth", "internal/editdistance", "internal/fluxerr", "platform", "policy", "registry", "verify"},
	"syncer":       {"gitrepo", "history", "internal/fluxerr", "platform"},
	"notify":       {"history"},

	// domain
	"gitrepo":     {"gitrepo/format/yamledit", "helmrelease", "platform", "policy"},
	"helmrelease": {"registry"},
	"platform":    {},
	"policy":      {"helmrelease"},
	"registry":    {},
	"history":     {"registry"},
	"verify":      {"registry"},

	// one package per format, behind gitrepo/format's Handler, and the
	// byte-span editing they share (below gitrepo, which edits with it)
	"gitrepo/format":           {"gitrepo", "gitrepo/format/helm", "gitrepo/format/kustomize", "gitrepo/format/plain", "gitrepo/format/setters", "platform"},
	"gitrepo/format/plain":     {"gitrepo", "internal/fluxerr", "platform"},
	"gitrepo/format/kustomize": {"gitrepo", "gitrepo/format/plain", "platform"},
	"gitrepo/format/helm":      {"gitrepo", "gitrepo/format/plain", "platform"},
	"gitrepo/format/setters":   {"gitrepo", "gitrepo/format/plain", "platform", "registry"},
	"gitrepo/format/yamledit":  {},

	// adapters
	"gitrepo/gogit":          {"gitrepo", "internal/fluxerr", "internal/giturl"},
	"platform/kube":          {"helmrelease", "internal/fielddiff", "internal/fluxerr", "internal/handover", "platform", "platform/kube/gitguard"},
	"platform/kube/sync":     {"internal/fielddiff", "internal/handover", "platform", "platform/kube/gitguard", "policy"},
	"platform/kube/gitguard": {},
	"registry/oci":           {"internal/fluxerr", "registry"},
	"verify/cosign":          {"verify"},
	"verify/storecache":      {"history", "verify"},
	"history/sqlite":         {"history", "registry"},
	"history/postgres":       {"history", "registry"},
	"history/store":          {"history", "history/postgres", "history/sqlite", "registry"},
	"history/storetest":      {"history", "registry"},
	"proto/fluxd/v1":         {},

	// internal helpers: one job each, no layer above them
	"internal/auth":         {"internal/filestamp"},
	"internal/tlsfiles":     {"internal/filestamp"},
	"internal/localstack":   {"internal/auth", "internal/pgserver", "internal/sshserver"},
	"internal/clidocs":      {},
	"internal/cosigntest":   {},
	"internal/clientkey":    {},
	"internal/editdistance": {},
	"internal/fielddiff":    {},
	"internal/filestamp":    {},
	"internal/fluxerr":      {},
	"internal/githttp":      {},
	"internal/giturl":       {},
	"internal/grpcwindow":   {},
	"internal/handover":     {},
	"internal/layers":       {},
	"internal/memlimit":     {},
	"internal/pgserver":     {},
	"internal/replicacert":  {},
	"internal/regtest":      {},
	"internal/sshserver":    {},
	"internal/testapp":      {},
	"internal/testcerts":    {},
	"internal/torture":      {},
	"internal/version":      {},
}

// adapterLibraries are the outside libraries that only adapters (and the
// binaries and test helpers that wire or start them) may import.
var adapterLibraries = map[string][]string{
	"k8s.io/client-go":                       {"cmd/fluxd", "gates", "internal/localstack", "platform/kube", "platform/kube/gitguard", "platform/kube/sync"},
	"github.com/go-git/":                     {"gitrepo/gogit"},
	"github.com/google/go-containerregistry": {"cmd/fluxd", "hack/image", "hack/sign", "internal/cosigntest", "internal/localstack", "internal/regtest", "registry", "registry/oci", "verify/cosign"},
	"github.com/sigstore/":                   {"internal/cosigntest", "verify/cosign"},
	"github.com/mattn/go-sqlite3":            {"history/sqlite"},
	"github.com/jackc/pgx":                   {"history/postgres", "internal/pgserver"},
	"google.golang.org/grpc":                 {"cmd/fluxctl", "daemon", "internal/grpcwindow", "proto/fluxd/v1", "web"},
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decoding go list's output: %v", err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// TestLayers checks every package's imports of the module against the
// table: an import not listed is an arrow the diagram does not have.
func TestLayers(t *testing.T) {
	pkgs := listPackages(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.ImportPath] = true
		may, ok := allowed[p.ImportPath]
		if !ok {
			t.Errorf("package %s is not in the layer table: add it to allowed in internal/layers/layers_test.go, and to docs/architecture.md, with the packages it may import", p.ImportPath)
			continue
		}
		set := map[string]bool{}
		for _, m := range may {
			set[m] = true
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			if !set[imp] {
				t.Errorf("%s imports %s, an arrow docs/architecture.md does not draw: move the code, or add the arrow to the table on purpose", p.ImportPath, imp)
			}
		}
	}
	var stale []string
	for name := range allowed {
		if !seen[name] {
			stale = append(stale, name)
		}
	}
	sort.Strings(stale)
	for _, name := range stale {
		t.Errorf("the layer table names %s, which is no longer a package: remove it", name)
	}
}

// TestAdapterLibraries keeps the outside libraries in the adapters: no
// domain or loop package talks to Kubernetes, git, a registry or a
// database itself.
func TestAdapterLibraries(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, imp := range p.Imports {
			for lib, who := range adapterLibraries {
				if !strings.HasPrefix(imp, lib) {
					continue
				}
				ok := false
				for _, w := range who {
					ok = ok || w == p.ImportPath
				}
				if !ok {
					t.Errorf("%s imports %s; only %s may", p.ImportPath, imp, strings.Join(who, ", "))
				}
			}
		}
	}
}

// TestNoCycleInTable: the table itself has no cycle, so the layers stay
// layers even where Go's own cycle check would not see one yet (two
// arrows allowed but not both used).
func TestNoCycleInTable(t *testing.T) {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var visit func(string, []string)
	visit = func(n string, path []string) {
		switch state[n] {
		case visiting:
			t.Errorf("the layer table has a cycle: %s", strings.Join(append(path, n), " -> "))
			return
		case done:
			return
		}
		state[n] = visiting
		for _, m := range allowed[n] {
			visit(m, append(path, n))
		}
		state[n] = done
	}
	names := make([]string, 0, len(allowed))
	for n := range allowed {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		visit(n, nil)
	}
}
