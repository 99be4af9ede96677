// Package memlimit sets the Go runtime's soft memory limit
// (runtime/debug.SetMemoryLimit, what GOMEMLIMIT sets) from the memory
// limit of the container fluxd runs in.
//
// Without a soft limit the collector lets the heap grow to twice the live
// heap (GOGC=100) whatever the container allows: at 10,000 workloads
// fluxd's live heap is under 100 MB, but the garbage of its start-up sync
// and of its views took its RSS past 512Mi, the limit of the installed
// Deployment, where the kernel kills it. With a soft limit the collector
// works harder as the heap nears it, instead.
//
// Why the cgroup files rather than the downward API (an env var from
// resources.limits.memory in the manifest): every way of starting the
// container (deploy/, the Helm chart with its own resources, fluxctl
// install, docker run -m) sets the cgroup, and no manifest has to carry
// one more env var that a user's overlay could drop. An explicit
// GOMEMLIMIT always wins: the runtime has applied it already, and Apply
// leaves it alone.
package memlimit
