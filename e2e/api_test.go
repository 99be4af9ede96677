package e2e

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/fluxd/fluxd/internal/localstack"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

func TestVersionAndListServicesWithToken(t *testing.T) {
	f := sharedFluxd(t)
	c := fluxdv1.NewFluxServiceClient(dial(t, f.Addr))
	ctx := withToken(testContext(t), f.Tokens["viewer"])

	v, err := c.Version(ctx, &fluxdv1.VersionRequest{})
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if v.GetVersion() == "" || v.GetInstance() != instance || v.GetRole() != fluxdv1.Role_ROLE_VIEWER {
		t.Errorf("Version = %v; want a version, instance %q, role viewer", v, instance)
	}

	resp, err := c.ListServices(ctx, &fluxdv1.ListServicesRequest{})
	if err != nil {
		t.Fatalf("ListServices: %v", err)
	}
	byID := map[string]*fluxdv1.Service{}
	for _, s := range resp.GetServices() {
		byID[s.GetId()] = s
	}
	for _, id := range localstack.ExampleServices {
		s, ok := byID[id]
		if !ok {
			t.Errorf("ListServices lacks %s; got %v", id, slices.Sorted(maps.Keys(byID)))
			continue
		}
		// The example Deployments rolled out on the kwok nodes.
		r := s.GetReplicas()
		if s.GetStatus() != "ready" || r.GetReady() != r.GetDesired() || r.GetDesired() == 0 {
			t.Errorf("%s: status %q, replicas %v; want ready", id, s.GetStatus(), r)
		}
	}
	hello := byID["default:deployment/helloworld"]
	if hello != nil {
		var images []string
		for _, c := range hello.GetContainers() {
			images = append(images, c.GetName()+"="+c.GetImage())
		}
		want := []string{"hello=" + stack.Registry + "/helloworld:1.0.0", "sidecar=" + stack.Registry + "/sidecar:1.0"}
		if !slices.Equal(images, want) {
			t.Errorf("helloworld containers = %v, want %v", images, want)
		}
	}
	worker := byID["default:deployment/worker"]
	if worker != nil && (len(worker.GetContainers()) != 2 || !worker.GetContainers()[0].GetInit()) {
		t.Errorf("worker containers = %v; want the init container first, marked init", worker.GetContainers())
	}
}

func TestRefusedWithoutAValidToken(t *testing.T) {
	f := sharedFluxd(t)
	conn := dial(t, f.Addr)
	c := fluxdv1.NewFluxServiceClient(conn)
	ctx := testContext(t)

	_, err := c.ListServices(ctx, &fluxdv1.ListServicesRequest{})
	if status.Code(err) != codes.Unauthenticated || !strings.Contains(err.Error(), "FLUX_TOKEN") {
		t.Errorf("no token: %v; want Unauthenticated saying how to set one", err)
	}
	_, err = c.Version(withToken(ctx, f.Tokens["admin"]+"x"), &fluxdv1.VersionRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("wrong token: %v; want Unauthenticated", err)
	}
	// Health alone answers without a token, for Kubernetes' gRPC probes.
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health without token: %v, %v; want SERVING", resp, err)
	}
}

func TestViewerCannotMutate(t *testing.T) {
	f := sharedFluxd(t)
	c := fluxdv1.NewFluxServiceClient(dial(t, f.Addr))
	viewer := withToken(testContext(t), f.Tokens["viewer"])
	deployer := withToken(testContext(t), f.Tokens["deployer"])

	_, err := c.Automate(viewer, &fluxdv1.AutomateRequest{Service: "default:deployment/helloworld"})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "deployer") {
		t.Errorf("viewer Automate: %v; want PermissionDenied naming the role needed", err)
	}
	_, err = c.Release(viewer, &fluxdv1.ReleaseRequest{Kind: fluxdv1.ReleaseKind_RELEASE_KIND_EXECUTE, Spec: &fluxdv1.ReleaseSpec{All: true, AllLatest: true}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("viewer Release execute: %v; want PermissionDenied", err)
	}
	// A deployer passes authorization; a bad pattern is refused and
	// nothing is committed.
	head := remoteHead(t)
	bad := "semver:~>1.x.y.z"
	_, err = c.SetPolicy(deployer, &fluxdv1.SetPolicyRequest{Service: "default:deployment/helloworld", TagAll: &bad})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "bad semver range") {
		t.Errorf("deployer SetPolicy with a bad range: %v; want InvalidArgument naming the problem", err)
	}
	if got := remoteHead(t); got != head {
		t.Errorf("a refused policy moved the remote from %s to %s", head, got)
	}
	// A push notification refreshes the repository.
	resp, err := c.NotifyImage(deployer, &fluxdv1.NotifyImageRequest{Image: stack.Registry + "/helloworld"})
	if err != nil || resp.GetRepository() != stack.Registry+"/helloworld" || resp.GetTags() < 3 {
		t.Errorf("NotifyImage: %v, %v", resp, err)
	}
}
