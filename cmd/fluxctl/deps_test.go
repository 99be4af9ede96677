package main

import (
	"os/exec"
	"strings"
	"testing"
)

// fluxctl is a thin client: the cluster, git and the database stay behind
// the API. This keeps it so. The domain package platform (types, no
// client) is allowed: fluxctl check reads a checkout's files with
// gitrepo's parsers, which name workloads by platform.ID; its adapters
// (platform/kube) are not.
func TestFluxctlImportsNoBackends(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{"k8s.io/client-go", "k8s.io/api/", "github.com/go-git/", "github.com/mattn/go-sqlite3", "github.com/jackc/pgx", "github.com/fluxd/fluxd/history/", "github.com/fluxd/fluxd/platform/", "github.com/fluxd/fluxd/daemon"}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("fluxctl depends on %s", pkg)
			}
		}
	}
}
