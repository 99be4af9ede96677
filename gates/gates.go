package gates

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/fluxd/fluxd/promotion"
)

// Gates runs checks of every kind. Its zero value is not usable: make
// one with New.
type Gates struct {
	kube kubernetes.Interface
	opts options
}

var _ promotion.Checker = (*Gates)(nil)

// Option changes one of New's defaults.
type Option func(*options)

type options struct {
	httpClient *http.Client
	jobPoll    time.Duration
	jobTTL     time.Duration
	log        *slog.Logger
}

// DefaultJobTTL is how long a check's Job is kept after it finished,
// when its template does not set ttlSecondsAfterFinished: long enough to
// read its pod's logs, and for a restarted fluxd to find the Job it
// started rather than start it again.
const DefaultJobTTL = time.Hour

// DefaultJobPoll is how often a Job's status is read while it runs.
const DefaultJobPoll = 2 * time.Second

// WithHTTPClient sets the client of http and prometheus checks (default:
// a client of its own over a clone of http.DefaultTransport). Each
// request's timeout is the check's, not the client's.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.httpClient = c } }

// WithJobPoll sets how often a Job's status is read (default
// DefaultJobPoll).
func WithJobPoll(d time.Duration) Option { return func(o *options) { o.jobPoll = d } }

// WithJobTTL sets the ttlSecondsAfterFinished of Jobs whose template
// does not set it (default DefaultJobTTL).
func WithJobTTL(d time.Duration) Option { return func(o *options) { o.jobTTL = d } }

// WithLogger sets where the gates log the Jobs they start (default:
// nowhere).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// New returns the Checker of every kind of check. kube is the cluster
// job checks run in; nil when fluxd has none, and then a job check fails
// saying so.
func New(kube kubernetes.Interface, opts ...Option) *Gates {
	o := options{jobPoll: DefaultJobPoll, jobTTL: DefaultJobTTL}
	for _, f := range opts {
		f(&o)
	}
	if o.httpClient == nil {
		o.httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if o.log == nil {
		o.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	o.log = o.log.With("component", "gates")
	return &Gates{kube: kube, opts: o}
}

// Run runs check c for bundle b in stage st: nil when it passed, or why
// it did not.
func (g *Gates) Run(ctx context.Context, c promotion.Check, st promotion.Stage, b promotion.Bundle) error {
	switch {
	case c.HTTP != nil && c.Job == nil && c.Prometheus == nil:
		return g.runHTTP(ctx, *c.HTTP)
	case c.Job != nil && c.HTTP == nil && c.Prometheus == nil:
		return g.runJob(ctx, c, *c.Job, st, b)
	case c.Prometheus != nil && c.HTTP == nil && c.Job == nil:
		return g.runPrometheus(ctx, *c.Prometheus)
	}
	return errors.New("the check sets none or several of http, job and prometheus; a check has exactly one (the Pipeline's parser should have refused it: please report this)")
}

// or returns d, or def when d is not positive.
func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
