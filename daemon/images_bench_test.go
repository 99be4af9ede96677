package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/regtest"
	"github.com/fluxd/fluxd/registry/oci"
)

// BenchmarkListImagesCold is the first list-images of a repository of
// -list.tags tags (10,000) that fluxd never read, at fluxd's default rate
// limit (100 requests a second): the time to the first answer and the
// registry requests made until then, under a semver policy and under
// build-time order, with the in-process registry's round trip (well under
// a millisecond) and with 50 ms added to each request (a registry across
// the internet). What the background refresh does after the answer is
// neither timed nor counted: the benchmark stops it.
func BenchmarkListImagesCold(b *testing.B) {
	// The registry is filled once per test binary (make bench runs each
	// benchmark 6 times) and left to the process's end.
	listOnce.Do(func() {
		listReg = regtest.New(1000)
		start := time.Now()
		listErr = listReg.PushVersions(context.Background(), listReg.Host()+"/team/big", 0, *listTags, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		b.Logf("pushed %d tags in %v", *listTags, time.Since(start).Round(time.Millisecond))
	})
	if listErr != nil {
		b.Fatal(listErr)
	}
	reg := listReg
	repo := reg.Host() + "/team/big"
	for _, bc := range []struct {
		name  string
		ann   map[string]string
		delay time.Duration
	}{
		{"semver", map[string]string{"fluxd.io/tag-all": "semver:>=0.1.0"}, 0},
		{"buildtime", map[string]string{"fluxd.io/tag-all": "glob:*"}, 0},
		{"semver-50ms", map[string]string{"fluxd.io/tag-all": "semver:>=0.1.0"}, 50 * time.Millisecond},
		{"buildtime-50ms", map[string]string{"fluxd.io/tag-all": "glob:*"}, 50 * time.Millisecond},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var answer time.Duration
			var requests, read int64
			for b.Loop() {
				b.StopTimer()
				d, tr := pagedDaemon(b, repo, "0.1.0", bc.ann, oci.RateConfig{})
				tr.delay = bc.delay
				reg.Reset()
				b.StartTimer()
				t0 := time.Now()
				_, cis, err := d.ListImagesPage(context.Background(), auth.Identity{}, "app", Page{Limit: 3})
				answer += time.Since(t0)
				b.StopTimer()
				requests += reg.Requests()
				if err != nil || cis[0].Err != nil || len(cis[0].Available) != *listTags {
					b.Fatalf("%v %v", err, cis)
				}
				read += int64(cis[0].Read)
				tr.closed.Store(true)
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(answer.Milliseconds())/n, "ms-to-first-answer")
			b.ReportMetric(float64(requests)/n, "requests-to-first-answer")
			b.ReportMetric(float64(read)/n, "times-read-at-answer")
		})
	}
}
