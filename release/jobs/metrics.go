package jobs

import (
	"time"

	"github.com/fluxd/fluxd/release"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fluxd/fluxd/history"
)

// Metrics are the job queue's Prometheus metrics: how jobs end and how
// long they, their release (up to the push) and their rollout take.
type Metrics struct {
	jobs           *prometheus.CounterVec
	jobDuration    *prometheus.HistogramVec
	queueWait      prometheus.Histogram
	release        *prometheus.HistogramVec
	rollout        *prometheus.HistogramVec
	notifyToCommit prometheus.Histogram
}

// NewMetrics makes the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	secs := []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	m := &Metrics{
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fluxd_jobs_total",
			Help: "Release jobs that ended, by type (release, automated-release) and outcome (succeeded, failed, cancelled).",
		}, []string{"type", "outcome"}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fluxd_job_duration_seconds",
			Help:    "How long a release job ran, from its start to its end (rollout included), by type and outcome.",
			Buckets: secs,
		}, []string{"type", "outcome"}),
		queueWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fluxd_job_queue_wait_seconds",
			Help:    "How long a release job waited in the queue before it started.",
			Buckets: secs,
		}),
		release: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fluxd_release_duration_seconds",
			Help:    "How long a release took from the job's start to its commit pushed (clone, edit, commit, push), by type.",
			Buckets: secs,
		}, []string{"type"}),
		rollout: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fluxd_rollout_duration_seconds",
			Help:    "How long a release's apply and rollout took, from its push to the job's end, by outcome.",
			Buckets: secs,
		}, []string{"outcome"}),
		notifyToCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "fluxd_notification_to_commit_seconds",
			Help:    "From an image notification to the automated release's commit pushed.",
			Buckets: []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
	}
	reg.MustRegister(m.jobs, m.jobDuration, m.queueWait, m.release, m.rollout, m.notifyToCommit)
	// Every label set is exported from the start, at zero, so that rates
	// and alerts see a job type or outcome before its first job.
	outcomes := []history.JobState{history.JobSucceeded, history.JobFailed, history.JobCancelled}
	for _, typ := range []history.Type{history.Release, history.AutomatedRelease} {
		m.release.WithLabelValues(string(typ))
		for _, o := range outcomes {
			m.jobs.WithLabelValues(string(typ), string(o))
			m.jobDuration.WithLabelValues(string(typ), string(o))
		}
	}
	for _, o := range outcomes {
		m.rollout.WithLabelValues(string(o))
	}
	return m
}

// Instrument makes the queue report to m. Call it before Run.
func (q *Queue) Instrument(m *Metrics) { q.metrics = m }

// jobTimer times one job's stages for the metrics.
type jobTimer struct {
	m        *Metrics
	typ      string
	start    time.Time
	notified time.Time
	pushed   time.Time
}

func (q *Queue) startTimer(e *entry, typ history.Type) *jobTimer {
	t := &jobTimer{m: q.metrics, typ: string(typ), start: time.Now(), notified: e.spec.NotifiedAt}
	if t.m != nil && e.resume == nil && !e.job.CreatedAt.IsZero() {
		t.m.queueWait.Observe(t.start.Sub(e.job.CreatedAt).Seconds())
	}
	return t
}

// stage notes a stage reached: the first after the push ends the release.
func (t *jobTimer) stage(s string) {
	if t.m == nil || !t.pushed.IsZero() || (s != release.StageApplying && s != release.StageRollingOut) {
		return
	}
	t.pushed = time.Now()
	t.m.release.WithLabelValues(t.typ).Observe(t.pushed.Sub(t.start).Seconds())
	if !t.notified.IsZero() {
		t.m.notifyToCommit.Observe(t.pushed.Sub(t.notified).Seconds())
	}
}

// end records the job's outcome.
func (t *jobTimer) end(state history.JobState) {
	if t.m == nil {
		return
	}
	outcome := string(state)
	t.m.jobs.WithLabelValues(t.typ, outcome).Inc()
	t.m.jobDuration.WithLabelValues(t.typ, outcome).Observe(time.Since(t.start).Seconds())
	if !t.pushed.IsZero() {
		t.m.rollout.WithLabelValues(outcome).Observe(time.Since(t.pushed).Seconds())
	}
}
