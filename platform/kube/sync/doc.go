// Package kubesync applies git's objects to a cluster, every kind, with
// server-side apply through fluxcd/pkg/ssa, the library Flux v2 applies,
// diffs, waits and prunes with: CRDs, Namespaces and ClusterRoles first,
// waiting for them to be established, then class definitions, then the
// rest. Its field manager is fluxd's ("fluxd"), the one a release applies
// a workload with, so a release and a sync never take fields from each
// other.
//
// One object the API server refuses does not stop the others: a stage
// whose batch apply fails is applied again object by object, and each
// failure is reported with the object's file and line in git.
//
// The objects it applied are kept in an inventory, a ConfigMap in fluxd's
// namespace; pruning deletes only objects of that inventory that left git,
// never one fluxd did not apply, nor one annotated fluxd.io/prune:
// disabled.
package kubesync
