package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/history"
)

// testVerificationResults: a result is read back after a reopen, keyed by
// repository, digest and profile; one that is not final is replaced, a
// final one stays; every result is exported.
func testVerificationResults(t *testing.T, f Factory) {
	ctx := context.Background()
	s, reopen := open(t, f)
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 123456789, time.UTC)
	save := func(r history.VerificationResult) {
		t.Helper()
		if err := s.SaveVerificationResult(ctx, r); err != nil {
			t.Fatalf("SaveVerificationResult(%+v): %v", r, err)
		}
	}
	get := func(repo, digest, profile string) (history.VerificationResult, error) {
		return s.VerificationResult(ctx, repo, digest, profile)
	}
	unsigned := history.VerificationResult{Repository: "reg/app", Digest: "sha256:a", Profile: "ci@01", Outcome: "unsigned", Detail: "no cosign signature", CheckedAt: t0}
	save(unsigned)
	failed := history.VerificationResult{Repository: "reg/app", Digest: "sha256:b", Profile: "ci@01", Outcome: "failed", Reason: "wrong-key", Detail: "signed by another key", CheckedAt: t0}
	save(failed)
	s = reopen()
	if got, err := get("reg/app", "sha256:a", "ci@01"); err != nil || !cmp.Equal(got, unsigned, equalTimes) {
		t.Errorf("after a reopen: %+v, %v; want %+v", got, err, unsigned)
	}
	for _, k := range [][3]string{{"reg/other", "sha256:a", "ci@01"}, {"reg/app", "sha256:a", "ci@02"}, {"reg/app", "sha256:c", "ci@01"}} {
		if got, err := get(k[0], k[1], k[2]); !errors.Is(err, history.ErrNotFound) {
			t.Errorf("VerificationResult%v = %+v, %v; want ErrNotFound", k, got, err)
		}
	}
	// Checked again, still unsigned: the new time is kept.
	unsigned.CheckedAt = t0.Add(time.Minute)
	save(unsigned)
	if got, err := get("reg/app", "sha256:a", "ci@01"); err != nil || !got.CheckedAt.Equal(unsigned.CheckedAt) {
		t.Errorf("checked again: %+v, %v; want checked at %s", got, err, unsigned.CheckedAt)
	}
	// Signed since: verified, final.
	verified := history.VerificationResult{Repository: "reg/app", Digest: "sha256:a", Profile: "ci@01", Outcome: "verified", Final: true, Signer: "sha256:k (ci.pub)", CheckedAt: t0.Add(2 * time.Minute)}
	save(verified)
	// A check that started before the signature and ends after: it
	// must not turn the verified digest back.
	late := unsigned
	late.CheckedAt = t0.Add(3 * time.Minute)
	save(late)
	if got, err := get("reg/app", "sha256:a", "ci@01"); err != nil || !cmp.Equal(got, verified, equalTimes) {
		t.Errorf("a late unsigned saved over a verified result: %+v, %v; want %+v kept", got, err, verified)
	}

	var all []history.VerificationResult
	if err := s.EachVerificationResult(ctx, func(r history.VerificationResult) error { all = append(all, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]history.VerificationResult{verified, failed}, all, equalTimes); diff != "" {
		t.Errorf("exported (-want +got):\n%s", diff)
	}
}

// testVerificationResultsRace: replicas saving one key at once, one of
// them verified: the verified result is what stays.
func testVerificationResultsRace(t *testing.T, f Factory) {
	ctx := context.Background()
	s, _ := open(t, f)
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := history.VerificationResult{Repository: "reg/app", Digest: "sha256:a", Profile: "ci@01", Outcome: "unsigned", CheckedAt: t0.Add(time.Duration(i) * time.Millisecond)}
			if i == 17 {
				r.Outcome, r.Final, r.Signer = "verified", true, fmt.Sprint("signer-", i)
			}
			errs <- s.SaveVerificationResult(ctx, r)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.VerificationResult(ctx, "reg/app", "sha256:a", "ci@01")
	if err != nil || got.Outcome != "verified" || !got.Final || got.Signer != "signer-17" {
		t.Errorf("after 40 saves at once, one verified: %+v, %v; want the verified one", got, err)
	}
}
