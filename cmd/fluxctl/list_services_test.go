package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"

	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// stubClient answers ListServices from memory; every other method is nil
// and would panic if called.
type stubClient struct {
	fluxdv1.FluxServiceClient
	services []*fluxdv1.Service
}

func (c stubClient) ListServices(context.Context, *fluxdv1.ListServicesRequest, ...grpc.CallOption) (*fluxdv1.ListServicesResponse, error) {
	return &fluxdv1.ListServicesResponse{Services: c.services}, nil
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestListServicesOutput(t *testing.T) {
	c := stubClient{services: []*fluxdv1.Service{
		{
			Id: "default:deployment/helloworld", Status: "ready", InGit: true, Automated: true,
			Containers: []*fluxdv1.Container{{Name: "hello", Image: "reg/helloworld:1.0.0"}, {Name: "sidecar", Image: "reg/sidecar:1.0"}},
			Replicas:   &fluxdv1.ReplicaCounts{Desired: 2, Updated: 2, Ready: 2, Available: 2},
			Automation: &fluxdv1.Automation{State: "releasing", JobId: "ab12", Decision: "release hello=reg/helloworld:1.2.9"},
			TagFilters: map[string]string{"*": "semver:~1.2", "sidecar": "glob:main-*"},
			Warnings:   []string{"sidecar: tag filter glob:main-* matches no tag of reg/sidecar"},
		},
		{
			Id: "default:deployment/stuck", Status: "ready", InGit: true, Automated: true,
			Containers: []*fluxdv1.Container{{Name: "app", Image: "reg/app:1"}},
			Replicas:   &fluxdv1.ReplicaCounts{Desired: 1, Updated: 1, Ready: 1, Available: 1},
			Automation: &fluxdv1.Automation{State: "failing", Failures: 3, LastError: "cannot read the registry"},
		},
		{
			Id: "default:deployment/worker", Status: "updating", Locked: true, LockMessage: "locked by alex: incident 42: 5xx on checkout, rolling back", LockedBy: "alex",
			Containers: []*fluxdv1.Container{{Name: "migrate", Image: "reg/worker:1.0.0", Init: true}, {Name: "worker", Image: "reg/worker:1.0.0"}},
			Replicas:   &fluxdv1.ReplicaCounts{Desired: 3, Updated: 1, Ready: 2, Available: 2},
		},
	}}
	for _, o := range []string{"table", "json"} {
		t.Run(o, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runListServices(context.Background(), &buf, c, "", o); err != nil {
				t.Fatal(err)
			}
			golden(t, "list-services."+o, buf.Bytes())
		})
	}
}

// TestListServicesSyncOutput: with sync states and an image that differs
// from git's, the table grows SYNC and GOAL columns and a note per
// service against git; JSON carries syncState, syncDetail and goal.
func TestListServicesSyncOutput(t *testing.T) {
	c := stubClient{services: []*fluxdv1.Service{
		{
			Id: "shop:deployment/web", Status: "ready", InGit: true, SyncState: "drifted", SyncDetail: "container app runs reg/web:1.2.0, git says reg/web:1.0.0; 7 replicas, git says 4",
			Containers: []*fluxdv1.Container{{Name: "app", Image: "reg/web:1.2.0", Goal: "reg/web:1.0.0"}, {Name: "side", Image: "reg/side:1"}},
			Replicas:   &fluxdv1.ReplicaCounts{Desired: 7, Updated: 7, Ready: 7, Available: 7},
		},
		{
			Id: "shop:deployment/bad", Status: "not in cluster", InGit: true, SyncState: "failed", SyncDetail: "shop/bad.yaml:9: refused",
			Containers: []*fluxdv1.Container{{Name: "app", Image: "reg/web:1.0.0"}},
		},
		{
			Id: "shop:deployment/db", Status: "ready", InGit: true, SyncState: "synced",
			Containers: []*fluxdv1.Container{{Name: "db", Image: "reg/db:15"}},
			Replicas:   &fluxdv1.ReplicaCounts{Desired: 1, Updated: 1, Ready: 1, Available: 1},
		},
	}}
	for _, o := range []string{"table", "json"} {
		t.Run(o, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runListServices(context.Background(), &buf, c, "", o); err != nil {
				t.Fatal(err)
			}
			golden(t, "list-services-sync."+o, buf.Bytes())
		})
	}
}

func TestLockNote(t *testing.T) {
	for _, tc := range []struct {
		msg, by, want string
	}{
		{"locked", "", ""},
		{"locked by alex", "alex", " (alex)"},
		{"locked by alex: incident 42", "alex", " (alex: incident 42)"},
		{"locked: incident 42", "", " (incident 42)"},
		{"locked by alex: a very long reason that goes on and on", "alex", " (alex: a very long reason that g…)"},
	} {
		if got := lockNote(&fluxdv1.Service{Locked: true, LockMessage: tc.msg, LockedBy: tc.by}); got != tc.want {
			t.Errorf("lockNote(%q, by %q) = %q, want %q", tc.msg, tc.by, got, tc.want)
		}
	}
}

// An empty or unknown namespace is said to be one, not shown as a bare
// header.
func TestListServicesEmptyNamespace(t *testing.T) {
	var out bytes.Buffer
	if err := runListServices(context.Background(), &out, stubClient{}, "nope", "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `No services in namespace "nope"`) {
		t.Errorf("got:\n%s", out.String())
	}
	out.Reset()
	if err := runListServices(context.Background(), &out, stubClient{}, "", "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "No services:") {
		t.Errorf("got:\n%s", out.String())
	}
}
