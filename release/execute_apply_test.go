package release

import (
	"context"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/platform/kube"
	"github.com/fluxd/fluxd/platform/kube/gitguard"
)

// kubeGuardedCluster asks platform/kube's own check (the guard fluxd
// sets on its cluster) whether a release may apply a workload.
type kubeGuardedCluster struct {
	*recCluster
	kube *kube.Cluster
}

func (c kubeGuardedCluster) MayApply(id platform.ID, doc []byte) error {
	return c.kube.MayApply(id, doc)
}

// An automated release of a workload outside --sync-namespaces (here in
// "default", with only "apps" allowed) is refused as the sync would
// refuse it: nothing is committed, nothing applied.
func TestAutomatedReleaseOutsideSyncNamespacesCommitsNothing(t *testing.T) {
	e, repo, cluster, _ := newTestEngine(t)
	kc := &kube.Cluster{}
	kc.SetGuard(gitguard.New(gitguard.Config{Namespaces: []string{"apps"}}))
	e.cluster = kubeGuardedCluster{recCluster: cluster, kube: kc}
	_, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web")}, AllLatest: true, User: "automator"}, history.AutomatedRelease, ExecOptions{})
	if err == nil || !strings.Contains(err.Error(), "nothing was committed") || !strings.Contains(err.Error(), "--sync-namespaces apps") {
		t.Fatalf("err = %v", err)
	}
	if repo.files != nil || len(cluster.applied) != 0 {
		t.Errorf("committed %v, applied %v", repo.files, cluster.applied)
	}
	// The same release in an allowed namespace goes through.
	kc.SetGuard(gitguard.New(gitguard.Config{Namespaces: []string{"default"}}))
	if _, err := e.Execute(context.Background(), "team-a", Spec{Services: []platform.ID{id("web")}, AllLatest: true, User: "automator"}, history.AutomatedRelease, ExecOptions{}); err != nil {
		t.Fatalf("in an allowed namespace: %v", err)
	}
}
