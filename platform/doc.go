// Package platform holds what fluxd knows about the workloads running in a
// cluster: their IDs, containers and rollout state. It names the domain
// types and sentinel errors; the Kubernetes adapter lives in platform/kube,
// so no consumer needs to import client-go to use them.
package platform
