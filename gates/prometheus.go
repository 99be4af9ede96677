package gates

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/fluxd/fluxd/internal/giturl"
	"github.com/fluxd/fluxd/promotion"
)

// maxShownSeries is how many failing series a failure names; the rest
// are counted.
const maxShownSeries = 5

// runPrometheus asks the Prometheus HTTP API for the query's value now
// and compares every sample with the threshold.
func (g *Gates) runPrometheus(ctx context.Context, c promotion.PrometheusCheck) error {
	timeout := or(c.Timeout, promotion.DefaultCheckTimeout)
	shown := giturl.Redact(c.URL)
	cmp, ok := comparisons[c.Op]
	if !ok {
		return fmt.Errorf("prometheus op %q is not one of <, <=, >, >=, ==, != (the Pipeline's parser should have refused it)", c.Op)
	}
	client, err := api.NewClient(api.Config{Address: c.URL, Client: g.opts.httpClient})
	if err != nil {
		return fmt.Errorf("prometheus url %s: %s", shown, giturl.RedactError(c.URL, err))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, _, _, err := promv1.NewAPI(client).Query(ctx, c.Query, time.Now(), promv1.WithTimeout(timeout))
	if err != nil {
		return queryError(ctx, shown, c.URL, c.Query, timeout, err)
	}
	var samples []sample
	switch v := v.(type) {
	case *model.Scalar:
		samples = []sample{{"scalar", float64(v.Value)}}
	case model.Vector:
		for _, s := range v {
			samples = append(samples, sample{s.Metric.String(), float64(s.Value)})
		}
	case model.Matrix:
		return fmt.Errorf("query %q at %s returned a range vector (%d series); a check compares an instant value: drop the [range] selector or wrap it in a function such as rate(...[5m]) or avg_over_time(...[5m])", c.Query, shown, len(v))
	default:
		return fmt.Errorf("query %q at %s returned a %s; a check compares a number: make it an instant vector or a scalar", c.Query, shown, v.Type())
	}
	if len(samples) == 0 {
		return fmt.Errorf("query %q at %s returned no data; no data is not healthy, so the check fails (are the series scraped yet? does the query's selector match their labels?)", c.Query, shown)
	}
	var failing []string
	for _, s := range samples {
		if math.IsNaN(s.value) || !cmp(s.value, c.Threshold) {
			failing = append(failing, fmt.Sprintf("%s = %s", s.name, formatValue(s.value)))
		}
	}
	if len(failing) == 0 {
		return nil
	}
	want := fmt.Sprintf("%s %s", c.Op, formatValue(c.Threshold))
	if len(samples) == 1 {
		if v, ok := strings.CutPrefix(failing[0], "scalar = "); ok {
			return fmt.Errorf("query %q at %s is %s, not %s", c.Query, shown, v, want)
		}
		return fmt.Errorf("query %q at %s: %s, not %s", c.Query, shown, failing[0], want)
	}
	n, more := len(failing), ""
	if len(failing) > maxShownSeries {
		more = fmt.Sprintf(" and %d more", len(failing)-maxShownSeries)
		failing = failing[:maxShownSeries]
	}
	return fmt.Errorf("query %q at %s: %d of %d series are not %s: %s%s", c.Query, shown, n, len(samples), want, strings.Join(failing, ", "), more)
}

// sample is one value of a query's answer and the series it belongs to.
type sample struct {
	name  string
	value float64
}

// comparisons are the check's ops. NaN compares false with every one,
// and fails: a NaN is a division by zero, not a measure.
var comparisons = map[string]func(v, threshold float64) bool{
	"<":  func(v, t float64) bool { return v < t },
	"<=": func(v, t float64) bool { return v <= t },
	">":  func(v, t float64) bool { return v > t },
	">=": func(v, t float64) bool { return v >= t },
	"==": func(v, t float64) bool { return v == t },
	"!=": func(v, t float64) bool { return v != t },
}

func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// queryError says why a query had no answer, in words that point at the
// likely fix: the PromQL, the URL, or the server.
func queryError(ctx context.Context, shown, rawURL, query string, timeout time.Duration, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("query %q at %s had no answer within %s (the check's timeout)", query, shown, timeout)
	}
	var pe *promv1.Error
	if errors.As(err, &pe) {
		switch pe.Type {
		case promv1.ErrBadData:
			return fmt.Errorf("Prometheus at %s refused the query %q: %s (is it valid PromQL?)", shown, query, pe.Msg)
		case promv1.ErrTimeout, promv1.ErrCanceled, promv1.ErrExec:
			return fmt.Errorf("Prometheus at %s could not run the query %q: %s", shown, query, pe.Msg)
		}
		detail := snippet([]byte(pe.Detail))
		if detail != "" {
			detail = ": " + detail
		}
		return fmt.Errorf("%s answered the query %q with %s%s (is the url the Prometheus server's base, e.g. http://prometheus:9090, and is it Prometheus?)", shown, query, pe.Msg, detail)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("query %q at %s failed: %s", query, shown, giturl.RedactError(rawURL, err))
}
