package daemon

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
)

// list-services reads Flux v1's and Keel's annotations as their policies
// and warns where two prefixes on one workload disagree (fluxd's own wins).
func TestServicesReadPeerAnnotations(t *testing.T) {
	const files = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: flux
  annotations:
    fluxcd.io/automated: "true"
    fluxcd.io/tag.flux: semver:~1.2
spec: {template: {spec: {containers: [{name: flux, image: reg/flux:1.2.0}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: keel
  annotations: {keel.sh/policy: minor}
spec: {template: {spec: {containers: [{name: keel, image: reg/keel:1.2.0}]}}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: both
  annotations:
    fluxd.io/automated: "true"
    fluxcd.io/automated: "false"
    flux.weave.works/locked: "true"
    flux.weave.works/locked_msg: frozen
spec: {template: {spec: {containers: [{name: both, image: reg/both:1.2.0}]}}}
`
	defs, err := gitrepo.ParseFile("apps.yaml", []byte(files))
	if err != nil {
		t.Fatal(err)
	}
	m := &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}
	for _, def := range defs {
		m.Workloads[def.ID] = def
	}
	d := New(Config{GitRefresh: time.Minute}, Deps{Cluster: &stubCluster{}, Releaser: manifestReleaser{m: m}, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ss, err := d.Services(context.Background(), auth.Identity{}, "")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Service{}
	for _, s := range ss {
		got[s.ID.Name] = s
	}
	if s := got["flux"]; !s.Automated || s.Locked || s.Filters["flux"] != "semver:~1.2" || s.Filters["*"] != "glob:*" || len(s.Warnings) > 0 {
		t.Errorf("flux: automated=%v locked=%v filters=%v warnings=%q; want automated, semver:~1.2 for its container, glob:* for the rest, no warning",
			s.Automated, s.Locked, s.Filters, s.Warnings)
	}
	if s := got["keel"]; !s.Automated || s.Filters["*"] != "semver:minor" || len(s.Warnings) > 0 {
		t.Errorf("keel: automated=%v filters=%v warnings=%q; want automated with semver:minor, no warning", s.Automated, s.Filters, s.Warnings)
	}
	s := got["both"]
	if !s.Automated || !s.Locked || s.LockMsg != "locked: frozen" {
		t.Errorf("both: automated=%v locked=%v lock=%q; want fluxd's automation and the Flux v1 lock", s.Automated, s.Locked, s.LockMsg)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], `fluxcd.io/automated: "false" is overridden by fluxd.io/automated: "true"`) {
		t.Errorf("both: warnings = %q; want the disagreement on automation", s.Warnings)
	}
}

// list-services reads Flux v1's filter.fluxcd.io/<container> as the
// container's filter, and says what a Flux v1 annotation does not do, as
// fluxctl check does: a filter naming no container, an annotation fluxd
// does not read.
func TestServicesFluxV1FilterAndUnhonoured(t *testing.T) {
	const files = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: filtered
  annotations:
    fluxcd.io/automated: "true"
    filter.fluxcd.io/app: semver:~4.0
    filter.fluxcd.io/ap: semver:~5.0
    fluxcd.io/frobnicate: "yes"
spec: {template: {spec: {containers: [{name: app, image: reg/app:4.0.1}]}}}
`
	defs, err := gitrepo.ParseFile("apps.yaml", []byte(files))
	if err != nil {
		t.Fatal(err)
	}
	m := &gitrepo.Manifests{Workloads: map[platform.ID]*gitrepo.Definition{}}
	for _, def := range defs {
		m.Workloads[def.ID] = def
	}
	d := New(Config{GitRefresh: time.Minute}, Deps{Cluster: &stubCluster{}, Releaser: manifestReleaser{m: m}, Jobs: stubJobs{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ss, err := d.Services(context.Background(), auth.Identity{}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 {
		t.Fatalf("services %+v; want one", ss)
	}
	s := ss[0]
	if !s.Automated || s.Filters["app"] != "semver:~4.0" {
		t.Errorf("automated=%v filters=%v; want automated, semver:~4.0 for app", s.Automated, s.Filters)
	}
	all := strings.Join(s.Warnings, "\n")
	for _, want := range []string{`filter.fluxcd.io/ap names the container "ap"`, "Flux v1's fluxcd.io/frobnicate is not read by fluxd"} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings %q; want one saying %q", s.Warnings, want)
		}
	}
	if len(s.Warnings) != 2 {
		t.Errorf("warnings %q; want 2", s.Warnings)
	}
}
