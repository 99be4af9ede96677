// Package e2e holds the end-to-end tests: they start the real local stack
// (etcd, the Kubernetes control plane, kwok nodes, an OCI registry and a
// git remote) once per test binary, run the real fluxd and fluxctl
// binaries against it, and check what a user would check.
package e2e
