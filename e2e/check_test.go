package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/internal/localstack"
)

// TestFluxctlCheckDemoRepository: fluxctl check, with no daemon and no
// token, reads a clone of the demo's repository (the stack's git remote)
// and lists each example workload with its containers.
func TestFluxctlCheckDemoRepository(t *testing.T) {
	if stack == nil {
		t.Skip("needs the local stack")
	}
	clone := filepath.Join(t.TempDir(), "demo")
	gitCLI(t, "", "clone", "-q", "-b", stack.GitBranch, stack.GitURL, clone)
	out, stderr, code := fluxctl(t, nil, "check", clone, "--git-path", "deploy")
	if code != 0 {
		t.Fatalf("check: exit %d\n%s%s", code, out, stderr)
	}
	for _, want := range []string{"SERVICE", "default:deployment/helloworld", "hello", stack.Registry + "/helloworld:1.0.0", "sidecar", "default:deployment/redis", "default:deployment/worker"} {
		if !strings.Contains(out, want) {
			t.Errorf("check of the demo repository lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not read:") {
		t.Errorf("check could not read some of the demo repository:\n%s", out)
	}
}

// TestFluxctlCheckPeerAnnotations: fluxctl check on a repository with
// each peer's annotations (fluxd's, Flux v1's, Keel's, Argo CD Image
// Updater's), -o json, as a script would read it.
func TestFluxctlCheckPeerAnnotations(t *testing.T) {
	if stack == nil {
		t.Skip("needs the built binaries")
	}
	root, err := localstack.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, code := fluxctl(t, nil, "check", filepath.Join(root, "check", "testdata", "peers"), "-o", "json")
	if code != 0 {
		t.Fatalf("check: exit %d\n%s%s", code, out, stderr)
	}
	var r struct {
		Services []struct {
			ID         string
			Dialects   []string
			Honoured   bool
			Automated  bool
			Locked     bool
			Containers []struct {
				Name, Filter       string
				Pinned, FollowsTag bool
			}
			Suggest  map[string]string
			Warnings []string
		}
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, s := range r.Services {
		var cs []string
		for _, c := range s.Containers {
			cs = append(cs, c.Name+"="+c.Filter+map[bool]string{true: "+pin", false: ""}[c.Pinned]+map[bool]string{true: "+follow", false: ""}[c.FollowsTag])
		}
		got[s.ID] = strings.Join(s.Dialects, ",") + " " + map[bool]string{true: "automated", false: "manual"}[s.Automated] +
			map[bool]string{true: " locked", false: ""}[s.Locked] + map[bool]string{true: "", false: " not-read"}[s.Honoured] + " " + strings.Join(cs, " ")
	}
	want := map[string]string{
		"default:deployment/own":         "fluxd automated app=semver:~1.2+pin",
		"default:deployment/flux":        "flux-v1,flux-v1 (flux.weave.works) automated web=glob:1.21.*",
		"default:deployment/ignored":     "flux-v1 manual locked web=glob:*",
		"default:deployment/keel-force":  "keel automated app=+pin+follow",
		"default:statefulset/keel-label": "keel,keel (labels) automated db=semver:minor",
		"argocd:application/shop":        "argocd-image-updater automated not-read front=semver:~1.4 cache=regex:^main-[0-9a-f]{7}$ edge=+pin+follow",
		// Flux v2: the ImagePolicy is the service of its marked field;
		// the Deployment holding it stays a manual service of its own.
		"flux-system:imagepolicy/podinfo": "flux-v2 automated fluxv2/podinfo.yaml:Deployment/flux-system/podinfo:spec.template.spec.containers[0].image=semver:5.0.x",
		"flux-system:deployment/podinfo":  " manual podinfo=",
		// helm-operator: a HelmRelease's top-level image is chart-image.
		"default:helmrelease/redis": "flux-v1 automated chart-image=semver:~7.2",
		// Flux v1's filter.fluxcd.io/ form, on a workload and on a
		// HelmRelease as the Helm operator guide writes it.
		"default:deployment/filtered": "flux-v1 automated app=semver:~4.0 sidecar=glob:*",
		"default:helmrelease/mongodb": "flux-v1 automated chart-image=semver:~4.0",
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s:\n got %q\nwant %q", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("services %v; want %d", got, len(want))
	}
}
