package main

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/fluxd/fluxd/automator"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
)

// jobStore is what the queue keeps in the history store: jobs, their
// logs, and the notices of releases that began rolling out.
type jobStore interface {
	jobs.JobStore
	jobs.Notifier
}

// newAutomation builds the release job queue and the automator, which
// queues its releases there and checks again when a job ends.
func newAutomation(f flags, engine *release.Engine, store jobStore, tokens *auth.Store, reg prometheus.Registerer, log *slog.Logger) (*jobs.Queue, *automator.Automator) {
	queue := jobs.NewQueue(engine, store, f.rolloutTimeout, f.rollbackOnFailure, log)
	queue.SetCluster(f.clusterName)
	queue.Instrument(jobs.NewMetrics(reg))
	queue.NotifyStarts(store)
	auto := automator.New(automator.Config{ShortWait: f.automationShort, LongWait: f.automationLong, MaxBackoff: f.automationMaxBackoff, Metrics: reg, Scopes: tokens.ScopeOf, Instances: tokens.Instances, Notices: store}, engine, queue, clock.RealClock{}, log)
	queue.OnEnd(func(history.Job) { auto.Poke() })
	return queue, auto
}
