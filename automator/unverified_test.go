package automator

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/release"
)

// unverifiedPlanner is fakePlanner whose plans skip, for the services
// in skips, the newer images given as unverified (as release's
// olderVerified does).
type unverifiedPlanner struct {
	*fakePlanner
	skips map[string][]release.SkippedImage
}

func (p *unverifiedPlanner) Plan(ctx context.Context, spec release.Spec) (*release.Plan, error) {
	plan, err := p.fakePlanner.Plan(ctx, spec)
	if err != nil {
		return nil, err
	}
	for i, it := range plan.Items {
		if sk := p.skips[it.Service.Name]; len(sk) > 0 {
			plan.Items[i].Action, plan.Items[i].Reason, plan.Items[i].Updates = release.Skip, release.ReasonUnverified, nil
			plan.Items[i].Warnings = []string{"app: skipped newer images that do not pass signature verification"}
			plan.Items[i].Unverified = sk
		}
	}
	return plan, nil
}

type recordedNotices struct {
	got  []history.Notice
	fail bool
}

func (r *recordedNotices) Notify(_ context.Context, n history.Notice) (int64, error) {
	if r.fail {
		return 0, errors.New("database is locked")
	}
	r.got = append(r.got, n)
	return int64(len(r.got)), nil
}

func skipped(tag, digest, outcome string) release.SkippedImage {
	return release.SkippedImage{Container: "app", Image: "r/app:" + tag,
		Verification: release.Verification{Outcome: outcome, Profiles: []string{"signed"}, Digest: digest, Detail: "profile signed: " + outcome}}
}

// A newer image skipped for its signatures is told of once per service
// and digest: not again on the next pass, again once its tag moves to
// another digest; a check that reached no verdict (a registry down) is
// not told of; a notice that could not be stored is tried again.
func TestAutomatorTellsOfUnverifiedImagesOnce(t *testing.T) {
	p := &unverifiedPlanner{fakePlanner: newFake("a", "b"), skips: map[string][]release.SkippedImage{
		"a": {skipped("1.2", "sha256:12", release.VerifyUnsigned), skipped("1.1", "sha256:11", release.VerifyFailed)},
		"b": {skipped("2.0", "", release.VerifyError)},
	}}
	notices := &recordedNotices{}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	a := New(Config{LongWait: time.Minute, Notices: notices}, p, &fakeJobs{}, clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	pass := func() {
		t.Helper()
		clk.Step(2 * time.Minute)
		a.Step(ctx)
	}

	a.Step(ctx)
	if len(notices.got) != 2 {
		t.Fatalf("first pass: %d notices, want one for each of a's 2 skipped images (none for b's check without a verdict): %+v", len(notices.got), notices.got)
	}
	for i, want := range []string{"r/app:1.2 (sha256:12)", "r/app:1.1 (sha256:11)"} {
		ev := notices.got[i].Event
		if ev.Type != history.UnverifiedSkipped || ev.Instance != "team-a" || len(ev.Services) != 1 || ev.Services[0] != svc("a").String() ||
			!strings.Contains(ev.Message, want) || ev.User != User {
			t.Errorf("notice %d: %+v, want one of a's skip of %s", i, ev, want)
		}
	}
	pass()
	if len(notices.got) != 2 {
		t.Errorf("the next pass told again: %d notices", len(notices.got))
	}
	// 1.2 moved to another digest, still unsigned: told of again.
	p.skips["a"][0] = skipped("1.2", "sha256:12b", release.VerifyUnsigned)
	pass()
	if len(notices.got) != 3 || !strings.Contains(notices.got[2].Event.Message, "sha256:12b") {
		t.Errorf("a moved tag's new digest was not told of once: %+v", notices.got[2:])
	}
	// A notice that cannot be stored is tried again on the next pass.
	p.skips["a"] = append(p.skips["a"], skipped("1.3", "sha256:13", release.VerifyUnsigned))
	notices.fail = true
	pass()
	notices.fail = false
	pass()
	if len(notices.got) != 4 || !strings.Contains(notices.got[3].Event.Message, "sha256:13") {
		t.Errorf("a notice that failed to be stored was not stored on the next pass: %+v", notices.got[3:])
	}
}
