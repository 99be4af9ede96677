package release

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// fluxV1Workload is a workload as a Flux v1 repository has it: fluxcd.io/
// annotations, comments on and between them.
const fluxV1Workload = `# The web tier. Flux v1 automates it.
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    # automation, as Flux v1 set it up
    fluxcd.io/automated: "true" # on since 2019
    fluxcd.io/tag.web: semver:~1.2
spec:
  template:
    spec:
      containers:
        - name: web
          image: reg/web:1.2.0 # pinned by flux
`

// fluxctl lock on a Flux v1 workload writes Flux v1's lock (fluxcd.io/
// locked, locked_msg, locked_user) and keeps every comment; unlock takes it
// away again and leaves the file as it was.
func TestLockKeepsFluxV1Prefix(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": fluxV1Workload})
	ctx := context.Background()
	lock := map[string]string{AnnotationLocked: "true", AnnotationLockMessage: "incident 42", AnnotationLockedBy: "dana", AnnotationLockedAt: "2026-12-01T15:00:00Z"}
	if _, err := g.e.SetPolicy(ctx, "team", PolicyChange{Service: id("web"), Set: lock, Type: history.Lock, User: "dana"}); err != nil {
		t.Fatalf("lock: %v", err)
	}
	locked := g.remoteFile(t, "web.yaml")
	for _, want := range []string{
		`fluxcd.io/locked: "true"`, `fluxcd.io/locked_msg: "incident 42"`, `fluxcd.io/locked_user: "dana"`,
		"# The web tier. Flux v1 automates it.", "# automation, as Flux v1 set it up",
		`fluxcd.io/automated: "true" # on since 2019`, "fluxcd.io/tag.web: semver:~1.2", "image: reg/web:1.2.0 # pinned by flux",
	} {
		if !strings.Contains(locked, want) {
			t.Errorf("after the lock, web.yaml lacks %q:\n%s", want, locked)
		}
	}
	for _, never := range []string{"fluxd.io/locked:", "fluxd.io/lock-message", "fluxd.io/locked-by"} {
		if strings.Contains(locked, never) {
			t.Errorf("after the lock, web.yaml has %q, fluxd's own, on a Flux v1 workload:\n%s", never, locked)
		}
	}
	// The lock is read back as a lock: a release skips the workload.
	_, m, err := g.e.manifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if def := m.Workloads[id("web")]; def.Annotations[AnnotationLocked] != "true" || LockReason(def.Annotations) != "locked by dana: incident 42" {
		t.Errorf("read back: locked=%q reason %q; want locked by dana: incident 42", def.Annotations[AnnotationLocked], LockReason(def.Annotations))
	}

	unlock := map[string]string{AnnotationLocked: "", AnnotationLockMessage: "", AnnotationLockedBy: "", AnnotationLockedAt: ""}
	if _, err := g.e.SetPolicy(ctx, "team", PolicyChange{Service: id("web"), Set: unlock, Type: history.Unlock, User: "dana"}); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if got := g.remoteFile(t, "web.yaml"); got != strings.TrimSpace(fluxV1Workload) {
		t.Errorf("after lock and unlock, web.yaml is not as it was:\n%s\nwant:\n%s", got, fluxV1Workload)
	}
	if evs := g.events(t); len(evs) != 2 || evs[0].Error != "" || evs[1].Error != "" {
		t.Errorf("history = %+v; want a lock and an unlock, no error", evs)
	}
}

// A policy change that Flux v1's default already means (clearing the
// filter for all containers, which Flux v1 reads as glob:*) commits
// nothing.
func TestPolicyChangeWithNothingToWriteCommitsNothing(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": fluxV1Workload})
	before := gitCLI(t, g.bare, "rev-parse", "main")
	commit, err := g.e.SetPolicy(context.Background(), "team", PolicyChange{Service: id("web"), Set: map[string]string{AnnotationTagAll: ""}, Type: history.Policy, User: "dana"})
	if err != nil || commit != "" {
		t.Fatalf("SetPolicy = %q, %v; want nothing committed", commit, err)
	}
	if after := gitCLI(t, g.bare, "rev-parse", "main"); after != before {
		t.Errorf("the remote moved from %.12s to %.12s", before, after)
	}
}

// fluxV1FilterWorkload is a workload written with Flux v1's other filter
// form, filter.fluxcd.io/<container>, as its fluxctl reference documents.
const fluxV1FilterWorkload = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    fluxcd.io/automated: "true"
    filter.fluxcd.io/web: semver:~1.1 # hold to 1.1.x
spec:
  template:
    spec:
      containers:
        - name: web
          image: reg/web:1.0
`

// An automated release of a workload filtered by filter.fluxcd.io/web:
// semver:~1.1 picks 1.1, not the newer 1.2, as Flux v1 does; a filter
// set then is written on filter.fluxcd.io/web, its comment kept, with no
// fluxcd.io/tag.web beside it.
func TestFluxV1FilterAnnotationHoldsTheRelease(t *testing.T) {
	g := newRealGit(t, map[string]string{"web.yaml": fluxV1FilterWorkload})
	ctx := context.Background()
	if _, err := g.e.Execute(ctx, "team", Spec{Services: []platform.ID{id("web")}, AllLatest: true, User: "automator", Automated: true}, history.AutomatedRelease, ExecOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := g.remoteFile(t, "web.yaml"); !strings.Contains(got, "image: reg/web:1.1") {
		t.Errorf("after the automated release, web.yaml does not run reg/web:1.1 (semver:~1.1):\n%s", got)
	}
	if _, err := g.e.SetPolicy(ctx, "team", PolicyChange{Service: id("web"), Set: map[string]string{AnnotationTagPrefix + "web": "semver:~1.2"}, Type: history.Policy, User: "dana"}); err != nil {
		t.Fatalf("policy: %v", err)
	}
	got := g.remoteFile(t, "web.yaml")
	if !strings.Contains(got, `filter.fluxcd.io/web: "semver:~1.2" # hold to 1.1.x`) || strings.Contains(got, "tag.web") {
		t.Errorf("after setting the filter, web.yaml does not hold filter.fluxcd.io/web: semver:~1.2 alone:\n%s", got)
	}
}
