// Package gitguard decides which objects git may apply to the cluster.
// Whoever can push to fluxd's branch gets what fluxd's RBAC allows; a
// Guard refuses, by default, the objects with which a commit could take
// over the cluster or fluxd itself: cluster-wide RBAC, admission control,
// API aggregation, CRD conversion webhooks, anything in fluxd's own
// namespace, any pod that would run as fluxd's ServiceAccount, and, with
// --sync-namespaces, anything outside the namespaces it lists, and
// objects that would make another controller (Flux's, Argo CD's) apply
// things past those limits (delegate.go). Each has a flag that allows it.
//
// The continuous sync (platform/kube/sync) and a release's apply of a
// workload (platform/kube) both ask the same Guard, so no path that
// applies git bypasses it.
package gitguard
