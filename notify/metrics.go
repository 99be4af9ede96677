package notify

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Sender's Prometheus metrics (see docs/metrics.md).
type Metrics struct {
	deliveries *prometheus.CounterVec
	depth      *prometheus.GaugeVec
	oldest     *prometheus.GaugeVec
	reloads    *prometheus.CounterVec
}

// The outcomes of fluxd_notify_deliveries_total.
const (
	// OutcomeDelivered: the receiver took the notice (2xx).
	OutcomeDelivered = "delivered"
	// OutcomeFailed: an attempt failed (an error, a timeout, 5xx, 429,
	// 401...); the notice is tried again.
	OutcomeFailed = "failed"
	// OutcomeRejected: the receiver refused the notice for good (400,
	// 413, 422); it is not tried again.
	OutcomeRejected = "rejected"
	// OutcomeExpired: the notice grew older than --notify-max-age before
	// it was delivered, and was dropped.
	OutcomeExpired = "expired"
)

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fluxd_notify_deliveries_total",
			Help: "Notification delivery attempts by receiver and outcome: delivered, failed (tried again), rejected (refused for good), expired (older than --notify-max-age, dropped)."}, []string{"receiver", "outcome"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fluxd_notify_queue_depth",
			Help: "Notices in the outbox a receiver has not been given yet (on the leader)."}, []string{"receiver"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fluxd_notify_oldest_age_seconds",
			Help: "Age of the oldest notice a receiver has not been given yet; 0 when none waits (on the leader)."}, []string{"receiver"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fluxd_notify_config_reloads_total",
			Help: "Reloads of --notify-config after it changed, by result: ok, or error (the previous config is kept)."}, []string{"result"}),
	}
	if reg != nil {
		reg.MustRegister(m.deliveries, m.depth, m.oldest, m.reloads)
	}
	// Served at zero from the start, so that an alert on errors has a
	// series before the first reload.
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("error")
	return m
}

func (m *Metrics) delivery(receiver, outcome string) {
	if m != nil {
		m.deliveries.WithLabelValues(receiver, outcome).Inc()
	}
}

func (m *Metrics) queue(receiver string, depth int64, oldest float64) {
	if m != nil {
		m.depth.WithLabelValues(receiver).Set(float64(depth))
		m.oldest.WithLabelValues(receiver).Set(oldest)
	}
}

func (m *Metrics) forget(receiver string) {
	if m != nil {
		m.depth.DeleteLabelValues(receiver)
		m.oldest.DeleteLabelValues(receiver)
	}
}

func (m *Metrics) reload(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.reloads.WithLabelValues("ok").Inc()
	} else {
		m.reloads.WithLabelValues("error").Inc()
	}
}
