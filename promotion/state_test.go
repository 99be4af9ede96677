package promotion

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

func staging() Stage {
	return Stage{Name: "staging", From: "dev", Auto: true, Soak: 5 * time.Second,
		Checks: []Check{{Name: "http-0", HTTP: &HTTPCheck{URL: "http://x/"}}}}
}

func TestAdvanceThroughEveryGate(t *testing.T) {
	st := staging()
	r := Record{Pipeline: "web", Stage: "staging", Bundle: "b1", Status: Promoted, Since: t0, Current: true}
	step := func(ev Event, at time.Duration, want Status) {
		t.Helper()
		var err error
		r, err = Advance(r, st, ev, t0.Add(at))
		if err != nil {
			t.Fatalf("%s: %v", ev.Kind, err)
		}
		if r.Status != want {
			t.Fatalf("after %s: %s, want %s", ev.Kind, r.Status, want)
		}
	}
	step(Event{Kind: EvTick}, time.Second, Promoted)
	step(Event{Kind: EvRolledOut}, 2*time.Second, Verifying)
	step(Event{Kind: EvCheckPassed, Check: "http-0"}, 3*time.Second, Soaking)
	if got := r.SoakLeft(t0.Add(4 * time.Second)); got != 4*time.Second {
		t.Errorf("soak is measured from the checks' end: left %v, want 4s", got)
	}
	step(Event{Kind: EvTick}, 7*time.Second, Soaking)
	step(Event{Kind: EvTick}, 8*time.Second, Verified)
	if _, err := Advance(r, st, Event{Kind: EvCheckPassed, Check: "http-0"}, t0); !errors.Is(err, ErrTransition) {
		t.Errorf("a check result for a verified bundle: %v", err)
	}
}

func TestAdvanceNoChecksNoSoak(t *testing.T) {
	r, err := Advance(Record{Status: Promoted}, Stage{Name: "dev"}, Event{Kind: EvRolledOut}, t0)
	if err != nil || r.Status != Verified {
		t.Fatalf("%v %v", r.Status, err)
	}
}

func TestAdvanceFailures(t *testing.T) {
	st := staging()
	r, _ := Advance(Record{Status: Promoted}, st, Event{Kind: EvRolloutFailed, Reason: "pods not ready: ImagePullBackOff"}, t0)
	if r.Status != Failed || r.Reason != "rollout: pods not ready: ImagePullBackOff" {
		t.Errorf("rollout failed: %+v", r)
	}
	r, _ = Advance(Record{Status: Verifying}, st, Event{Kind: EvCheckFailed, Check: "http-0", Reason: "GET http://x/: 503"}, t0)
	if r.Status != Failed || r.Reason != "check http-0: GET http://x/: 503" {
		t.Errorf("check failed: %+v", r)
	}
	r, _ = Advance(Record{Status: Soaking, SoakUntil: t0.Add(time.Hour)}, st, Event{Kind: EvCheckFailed, Check: "http-0", Reason: "down"}, t0)
	if r.Status != Failed {
		t.Errorf("a check failing while soaking fails the bundle: %+v", r)
	}
	if _, err := Advance(Record{Status: Verifying}, st, Event{Kind: EvCheckFailed, Check: "nope"}, t0); !errors.Is(err, ErrTransition) {
		t.Errorf("an unknown check's result: %v", err)
	}
}

// A newer bundle promoted over one that is soaking never resets or ends
// its soak (Kargo's users' first complaint).
func TestSupersedingDoesNotResetSoak(t *testing.T) {
	st := staging()
	r := Record{Bundle: "b1", Status: Soaking, Since: t0, SoakUntil: t0.Add(5 * time.Second), Current: true}
	r, _ = Advance(r, st, Event{Kind: EvSuperseded, Bundle: "b2"}, t0.Add(time.Second))
	if r.Status != Soaking || r.Current || !r.SoakUntil.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("superseded while soaking: %+v", r)
	}
	r, _ = Advance(r, st, Event{Kind: EvTick}, t0.Add(5*time.Second))
	if r.Status != Verified {
		t.Errorf("it soaks on its own: %s", r.Status)
	}
	v, _ := Advance(Record{Status: Verifying}, st, Event{Kind: EvSuperseded, Bundle: "b3"}, t0)
	if v.Status != Superseded || v.Reason != "superseded by bundle b3" {
		t.Errorf("superseded before its checks passed: %+v", v)
	}
}

func TestApprovalsCountPeopleOnce(t *testing.T) {
	st := Stage{Name: "prod", From: "staging", Approvals: 2}
	r := Record{Status: AwaitingApproval}
	for _, by := range []string{"alice", "alice", "ci"} {
		var err error
		if r, err = Advance(r, st, Event{Kind: EvApproved, By: by}, t0); err != nil {
			t.Fatal(err)
		}
		if by == "alice" && r.Approved(st) {
			t.Errorf("alice approving twice counts once")
		}
	}
	if !r.Approved(st) || len(r.Approvers) != 2 {
		t.Errorf("alice and ci: %+v", r)
	}
	if _, err := Advance(Record{Status: Verified}, st, Event{Kind: EvApproved, By: "bob"}, t0); !errors.Is(err, ErrTransition) {
		t.Errorf("approving what is not waiting: %v", err)
	}
}
