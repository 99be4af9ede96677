// Package jobs is the release job queue: what runs when. It takes
// release jobs in (fluxctl release, the automator), stores them in the
// history store, runs them one at a time for every instance, tells
// watchers each change (WatchJob, the status page), writes each job's
// log, exports the queue's metrics, and carries on with the jobs a
// previous fluxd left live (Recover, and adopt for a leader that stepped
// down).
//
// What a job does is the release engine's (package release: plan, edit,
// commit, push, apply, follow the rollout). The queue sees it only
// through Executor, three methods that *release.Engine satisfies, so the
// engine changes without touching the queue, and the queue is tested with
// an executor of its own. The queue hands the engine a job's ID and
// fluxd's own context through the job's context (release.WithJob,
// release.WithRoot), so that a stop of fluxd is never taken for a user's
// cancel.
package jobs
