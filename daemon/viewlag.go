package daemon

import "time"

// A view of services is joined from the whole cluster, git and the
// automator: its cost grows with the number of workloads. The cluster's
// informers report every update, status updates included, and those
// grow with the workloads too: while 10,000 Deployments roll out (or
// settle after a sync created them), they change many times a second,
// and rebuilding the view at each change cost most of a core
// (BenchmarkScale's pprof: 45 % of fluxd's CPU in buildServices under
// list-services load). So a change of the cluster alone does not make a
// young view stale: a view answers until it is ten times as old as its
// build took, at most maxClusterLag, and rebuilding takes at most about a
// tenth of the time however fast the cluster changes. Views that cost
// less than minLagCost to build (1,000 workloads: a few milliseconds) are
// rebuilt at every change, as before. Past that age an expensive view
// still answers while the next is built behind it (viewBuilt), so the
// cluster shows at most one build later than the bound. A change in git, in the automator or
// a sync shows at once: those are fluxd's own doings, and callers expect
// to see them (a release, a policy change). So does the cluster as a job
// left it: a release's rollout, followed to its end, is in the cluster's
// caches when the job ends, and its user lists services next.
const maxClusterLag = 2 * time.Second

// minLagCost is a variable for tests that compare each answer with the
// cluster as it is, which a loaded machine's slower builds (under -race)
// would otherwise let lag.
var minLagCost = 20 * time.Millisecond

// coversButCluster says a view of key k answers a caller that read o, but
// for changes of the cluster.
func (k viewKey) coversButCluster(o viewKey) bool {
	return k.manifests == o.manifests && k.sync == o.sync && k.automator >= o.automator && k.jobs >= o.jobs
}

// endedJobs is what a job queue that counts its ended jobs answers.
type endedJobs interface{ Ended() uint64 }

// jobsEnded is how many jobs the queue has ended, 0 when it does not say.
func (d *Daemon) jobsEnded() uint64 {
	if j, ok := d.deps.Jobs.(endedJobs); ok {
		return j.Ended()
	}
	return 0
}

// young says the kept view may still answer for a cluster that moved on
// since it was built. Called with the view's lock held.
func (v *viewCache) young(now time.Time) bool {
	if v.cost < minLagCost {
		return false
	}
	return now.Sub(v.builtAt) < min(10*v.cost, maxClusterLag)
}
