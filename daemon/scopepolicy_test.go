package daemon

import (
	"os"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// A Flux v2 ImagePolicy of team a's namespace whose marker sits in team
// b's file, on team b's Deployment, is not team a's to see: its service's
// containers are b's fields (file, object, image). The release engine
// leaves such a service out of a scoped plan (release.InScope); list-services
// and every call naming it leave it out as well, kept answers included.
// So with a HelmRelease of a's namespace whose spec.targetNamespace is b.
func TestScopedCallerDoesNotSeeAPolicyMarkingAnotherTeamsField(t *testing.T) {
	cluster, m := scopeWorld()
	policy := platform.ID{Namespace: "a", Kind: "imagepolicy", Name: "shared"}
	field := "b/secret-api.yaml:Deployment/b/secret-api:spec.template.spec.containers[0].image"
	m.Workloads[policy] = &gitrepo.Definition{ID: policy, File: "a/policy.yaml", Format: gitrepo.FormatSetters,
		Containers:  []gitrepo.Container{{Name: field, Image: "reg.example/b/secret-api:1"}},
		Annotations: map[string]string{},
		ImagePolicy: &gitrepo.ImagePolicy{NSName: gitrepo.NSName{Namespace: "a", Name: "shared"}, File: "a/policy.yaml", SemverRange: ">=1"},
		Setters:     []gitrepo.Setter{{Field: field, File: "b/secret-api.yaml", Namespace: "b", Policy: gitrepo.NSName{Namespace: "a", Name: "shared"}, Value: "reg.example/b/secret-api:1"}},
	}
	// And a HelmRelease of namespace a that installs into b.
	hr := platform.ID{Namespace: "a", Kind: platform.KindHelmRelease, Name: "into-b"}
	m.Workloads[hr] = &gitrepo.Definition{ID: hr, File: "a/hr.yaml", Format: gitrepo.FormatHelm, Annotations: map[string]string{}, InstallsInto: []string{"b"},
		Containers: []gitrepo.Container{{Name: "chart-image", Image: "reg.example/b/secret-api:1"}}}
	f := newFixtureWith(t, Config{}, Deps{Cluster: cluster, Releaser: scopeReleaser{m: m}, Jobs: stubJobs{}, Images: stubImages{}})
	fh, err := os.OpenFile(f.tokensFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString("scope team-a namespaces=a\n"); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	ctx := withToken(f.tokens[auth.Viewer])
	for range 2 { // the second answer is the kept one
		ls, err := f.client.ListServices(ctx, &fluxdv1.ListServicesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got := serviceIDs(ls); got != scopeMine.String() {
			t.Errorf("team a's list-services = %s, want only %s", got, scopeMine)
		}
		if strings.Contains(ls.String(), "secret-api") {
			t.Errorf("team a's list-services shows team b's field: %s", ls)
		}
	}
	if _, err := f.client.ListImages(ctx, &fluxdv1.ListImagesRequest{Service: policy.String()}); err == nil {
		t.Errorf("team a may list the images of a policy that marks team b's field")
	}
	if _, err := f.client.ListImages(ctx, &fluxdv1.ListImagesRequest{Service: hr.String()}); err == nil {
		t.Errorf("team a may list the images of a HelmRelease that installs into b")
	}
	// Unscoped, it is there.
	ls, err := f.client.ListServices(withToken(f.other[auth.Viewer]), &fluxdv1.ListServicesRequest{})
	if err != nil || !strings.Contains(serviceIDs(ls), policy.String()) || !strings.Contains(serviceIDs(ls), hr.String()) {
		t.Errorf("unscoped list-services = %s, %v; want the policy's and the HelmRelease's services", serviceIDs(ls), err)
	}
}
