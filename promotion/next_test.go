package promotion

import (
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func minimal(t *testing.T) Pipeline {
	t.Helper()
	b, err := os.ReadFile("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ps, problems := Parse("web.yaml", b)
	if len(problems) > 0 || len(ps) != 1 {
		t.Fatalf("%v %v", ps, problems)
	}
	return ps[0]
}

func rec(stage, bundle string, created int, st Status, current bool) Record {
	return Record{Pipeline: "web", Stage: stage, Bundle: bundle, Created: t0.Add(time.Duration(created) * time.Minute), Status: st, Since: t0, Current: current, PromotedBy: "fluxd"}
}

func TestNext(t *testing.T) {
	p := minimal(t)
	for _, tc := range []struct {
		name string
		v    View
		want []Decision
	}{
		{"nothing verified yet", View{Records: []Record{rec("dev", "b1", 1, Verifying, true)}}, nil},
		{"auto promotes the newest verified", View{Records: []Record{
			rec("dev", "b1", 1, Verified, false), rec("dev", "b2", 2, Verified, true), rec("dev", "b3", 3, Soaking, false)}},
			[]Decision{{Stage: "staging", Action: ActPromote, Bundle: "b2", Reason: "the newest bundle verified in dev"}}},
		{"already there", View{Records: []Record{rec("dev", "b2", 2, Verified, true), rec("staging", "b2", 2, Soaking, true)}}, nil},
		{"failed there is never promoted again", View{Records: []Record{rec("dev", "b2", 2, Verified, true), rec("staging", "b2", 2, Failed, true)}}, nil},
		{"older than what runs is not promoted over it", View{Records: []Record{rec("dev", "b1", 1, Verified, false), rec("dev", "b3", 3, Promoted, true), rec("staging", "b3", 3, Promoted, true)}}, nil},
		{"paused holds, and says so", View{Records: []Record{rec("dev", "b2", 2, Verified, true), rec("staging", "b1", 1, Verified, true)},
			Paused: map[string]Pause{"staging": {By: "alice", Reason: "promoted b1 by hand"}}},
			[]Decision{{Stage: "staging", Action: ActHold, Bundle: "b2", Reason: "promotion into staging is paused by alice (promoted b1 by hand): 'fluxctl stages resume staging' ends it"}}},
		{"locked holds", View{Records: []Record{rec("dev", "b2", 2, Verified, true)}, Locked: map[string]string{"staging": "incident 42"}},
			[]Decision{{Stage: "staging", Action: ActHold, Bundle: "b2", Reason: "a service of staging is locked (incident 42)"}}},
		{"approvals: first await", View{Records: []Record{rec("staging", "b2", 2, Verified, true)}},
			[]Decision{{Stage: "prod", Action: ActAwaitApproval, Bundle: "b2", Reason: "verified in staging; needs 1 approval(s)"}}},
		{"approvals: waiting", View{Records: []Record{rec("staging", "b2", 2, Verified, true), rec("prod", "b2", 2, AwaitingApproval, false)}}, nil},
		{"approvals: approved is promoted", View{Records: []Record{rec("staging", "b2", 2, Verified, true),
			func() Record {
				r := rec("prod", "b2", 2, AwaitingApproval, false)
				r.Approvers = []string{"bob"}
				return r
			}()}},
			[]Decision{{Stage: "prod", Action: ActPromote, Bundle: "b2", Reason: "approved by 1 of 1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Next(p, tc.v), ignoreStage("prod", tc.name)); d != "" {
				t.Errorf("(-want +got)\n%s", d)
			}
		})
	}
}

// ignoreStage leaves out a stage's decisions from a comparison, but for
// the cases about that stage (named after it).
func ignoreStage(stage, caseName string) cmp.Option {
	return cmp.Transformer("only", func(ds []Decision) []Decision {
		if contains(caseName, "approv") {
			return ds
		}
		var out []Decision
		for _, d := range ds {
			if d.Stage != stage {
				out = append(out, d)
			}
		}
		return out
	})
}

func only(stage string, ds []Decision) []Decision {
	var out []Decision
	for _, d := range ds {
		if d.Stage == stage {
			out = append(out, d)
		}
	}
	return out
}

func TestNextRollsBackToTheLastVerified(t *testing.T) {
	p := minimal(t)
	p.Stages[1].RollbackOnFailure = true
	old := rec("staging", "b1", 1, Verified, false)
	older := rec("staging", "b0", 0, Verified, false)
	older.Since = t0.Add(-time.Hour)
	bad := rec("staging", "b2", 2, Failed, true)
	bad.Reason = "check http-0: 503"
	got := only("staging", Next(p, View{Records: []Record{rec("dev", "b2", 2, Verified, true), older, old, bad}}))
	want := []Decision{{Stage: "staging", Action: ActRollback, Bundle: "b1", Reason: "bundle b2 failed (check http-0: 503); back to b1, the stage's last verified bundle"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	p.Stages[1].RollbackOnFailure = false
	if got := only("staging", Next(p, View{Records: []Record{rec("dev", "b2", 2, Verified, true), old, bad}})); len(got) != 0 {
		t.Errorf("without rollbackOnFailure the stage stays: %v", got)
	}
}

func TestPromotableAndPauses(t *testing.T) {
	p := minimal(t)
	v := View{Records: []Record{rec("dev", "b1", 1, Verified, false), rec("dev", "b2", 2, Verified, false), rec("dev", "b3", 3, Verifying, true),
		rec("staging", "b0", 0, Failed, false)}}
	if err := Promotable(p, "staging", "b1", v, false); err != nil {
		t.Errorf("an older verified bundle by hand: %v", err)
	}
	if !PausesAuto(p, "staging", "b1", v) || PausesAuto(p, "staging", "b2", v) {
		t.Errorf("only the newest verified bundle leaves auto-promotion running")
	}
	for _, tc := range []struct{ stage, bundle, want string }{
		{"staging", "b3", "is verifying in dev, not verified"},
		{"staging", "zz", "was never in dev"},
		{"staging", "b0", "failed in staging"},
		{"dev", "b1", "is the pipeline's first"},
		{"qa", "b1", `has no stage "qa" (stages: dev, staging, prod)`},
	} {
		err := Promotable(p, tc.stage, tc.bundle, v, false)
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%s into %s: %v, want %q", tc.bundle, tc.stage, err, tc.want)
		}
	}
	if err := Promotable(p, "staging", "b3", v, true); err != nil {
		t.Errorf("forced: %v", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}

// TestRandomPipelineRuns drives the minimal pipeline with seeded random
// builds, rollouts, check results, approvals, promotions by hand,
// resumes and time, applying Next's decisions as fluxd would, and checks
// the invariants after every step:
//
//	(a) a stage's current bundle was verified in its from-stage, unless
//	    a person promoted it;
//	(b) a bundle failed in a stage is never promoted into it again by fluxd;
//	(c) fluxd never promotes into a paused stage, nor a bundle older than
//	    the one the stage runs;
//	(d) each stage has at most one current bundle.
//
// PROMOTION_SEED replays one seed; PROMOTION_RUNS=N adds N fresh ones.
func TestRandomPipelineRuns(t *testing.T) {
	seeds := []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if s := os.Getenv("PROMOTION_SEED"); s != "" {
		n, _ := strconv.ParseInt(s, 10, 64)
		seeds = []int64{n}
	}
	// PROMOTION_RUNS=N adds N fresh seeds (printed on failure).
	if n, _ := strconv.Atoi(os.Getenv("PROMOTION_RUNS")); n > 0 {
		base := time.Now().UnixNano()
		for i := range n {
			seeds = append(seeds, base+int64(i))
		}
	}
	reached := map[Status]bool{}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			for st := range runRandom(t, seed, 300) {
				reached[st] = true
			}
		})
	}
	// The runs must reach every state, or they prove little.
	for _, st := range []Status{AwaitingApproval, Promoted, Verifying, Soaking, Verified, Failed, Superseded} {
		if !reached[st] && len(seeds) > 1 {
			t.Errorf("no run reached %s", st)
		}
	}
}

type sim struct {
	p      Pipeline
	now    time.Time
	recs   []*Record
	paused map[string]Pause
	built  int
	log    []string
}

func (s *sim) view() View {
	v := View{Paused: s.paused}
	for _, r := range s.recs {
		v.Records = append(v.Records, *r)
	}
	return v
}

func (s *sim) find(stage, bundle string) *Record {
	for _, r := range s.recs {
		if r.Stage == stage && r.Bundle == bundle {
			return r
		}
	}
	return nil
}

func (s *sim) current(stage string) *Record {
	for _, r := range s.recs {
		if r.Stage == stage && r.Current {
			return r
		}
	}
	return nil
}

// promote is what the engine's promotion does to the records: the new
// bundle is current and promoted, the old one superseded.
func (s *sim) promote(t *testing.T, stage, bundle string, created time.Time, by string) {
	st, _ := s.p.Stage(stage)
	if cur := s.current(stage); cur != nil && cur.Bundle != bundle {
		*cur, _ = Advance(*cur, st, Event{Kind: EvSuperseded, Bundle: bundle}, s.now)
	}
	if r := s.find(stage, bundle); r != nil {
		// Back onto a bundle the stage had: a rollback keeps who first
		// promoted it there; a person's promotion is theirs.
		r.Current = true
		if by != "fluxd" {
			r.PromotedBy = by
		}
		if r.Status != Verified {
			r.Status, r.Since, r.Passed = Promoted, s.now, nil
		}
		return
	}
	s.recs = append(s.recs, &Record{Pipeline: s.p.Name, Stage: stage, Bundle: bundle, Created: created, Status: Promoted, Since: s.now, Current: true, PromotedBy: by})
}

func runRandom(t *testing.T, seed int64, steps int) map[Status]bool {
	rng := rand.New(rand.NewSource(seed))
	p := minimal(t)
	p.Stages[1].RollbackOnFailure = true
	p.Stages[2].RollbackOnFailure = true
	s := &sim{p: p, now: t0, paused: map[string]Pause{}}
	defer func() {
		if t.Failed() {
			t.Logf("seed %d, log:\n%s", seed, joinLines(s.log))
		}
	}()
	stages := []string{"dev", "staging", "prod"}
	created := map[string]time.Time{}
	for i := 0; i < steps && !t.Failed(); i++ {
		s.now = s.now.Add(time.Duration(rng.Intn(3000)) * time.Millisecond)
		stage := stages[rng.Intn(len(stages))]
		st, _ := p.Stage(stage)
		cur := s.current(stage)
		switch op := rng.Intn(9); op {
		case 0: // a new build released into dev
			s.built++
			b := fmt.Sprintf("b%02d", s.built)
			created[b] = s.now
			s.promote(t, "dev", b, s.now, "automator")
			s.log = append(s.log, "build "+b)
		case 1: // a rollout ends
			if cur != nil && cur.Status == Promoted {
				ev := Event{Kind: EvRolledOut}
				if rng.Intn(6) == 0 {
					ev = Event{Kind: EvRolloutFailed, Reason: "ProgressDeadlineExceeded"}
				}
				*cur, _ = Advance(*cur, st, ev, s.now)
				s.log = append(s.log, fmt.Sprintf("%s %s %s", ev.Kind, stage, cur.Bundle))
			}
		case 2: // a check reports
			if cur != nil && cur.Status == Verifying {
				for _, c := range st.Checks {
					ev := Event{Kind: EvCheckPassed, Check: c.Name}
					if rng.Intn(4) == 0 {
						ev = Event{Kind: EvCheckFailed, Check: c.Name, Reason: "503"}
					}
					*cur, _ = Advance(*cur, st, ev, s.now)
					s.log = append(s.log, fmt.Sprintf("%s %s %s", ev.Kind, stage, cur.Bundle))
				}
			}
		case 3: // someone approves
			for _, r := range s.recs {
				if r.Stage == stage && r.Status == AwaitingApproval && rng.Intn(2) == 0 {
					by := []string{"alice", "bob", "ci"}[rng.Intn(3)]
					*r, _ = Advance(*r, st, Event{Kind: EvApproved, By: by}, s.now)
					s.log = append(s.log, fmt.Sprintf("approve %s %s by %s", stage, r.Bundle, by))
				}
			}
		case 4: // a person promotes a random bundle by hand
			if st.From == "" || s.built == 0 {
				break
			}
			b := fmt.Sprintf("b%02d", 1+rng.Intn(s.built))
			force := rng.Intn(5) == 0
			v := s.view()
			if err := Promotable(p, stage, b, v, force); err != nil {
				break
			}
			if PausesAuto(p, stage, b, v) {
				s.paused[stage] = Pause{By: "alice", Reason: "promoted " + b, Since: s.now}
			}
			s.promote(t, stage, b, created[b], "alice")
			s.log = append(s.log, fmt.Sprintf("alice promotes %s into %s (force %v)", b, stage, force))
		case 5: // resume
			delete(s.paused, stage)
			s.log = append(s.log, "resume "+stage)
		default: // time passes; fluxd acts on Next
		}
		for _, r := range s.recs {
			st, _ := p.Stage(r.Stage)
			*r, _ = Advance(*r, st, Event{Kind: EvTick}, s.now)
		}
		for _, d := range Next(p, s.view()) {
			st, _ := p.Stage(d.Stage)
			switch d.Action {
			case ActPromote:
				if _, paused := s.paused[d.Stage]; paused {
					t.Errorf("(c) fluxd promotes %s into paused %s", d.Bundle, d.Stage)
				}
				if r := s.find(d.Stage, d.Bundle); r != nil && r.Status == Failed {
					t.Errorf("(b) fluxd promotes %s into %s where it failed", d.Bundle, d.Stage)
				}
				if cur := s.current(d.Stage); cur != nil && created[d.Bundle].Before(cur.Created) {
					t.Errorf("(c) fluxd promotes %s over the newer %s in %s", d.Bundle, cur.Bundle, d.Stage)
				}
				s.promote(t, d.Stage, d.Bundle, created[d.Bundle], "fluxd")
			case ActAwaitApproval:
				s.recs = append(s.recs, &Record{Pipeline: p.Name, Stage: d.Stage, Bundle: d.Bundle, Created: created[d.Bundle], Status: AwaitingApproval, Since: s.now})
			case ActRollback:
				s.promote(t, d.Stage, d.Bundle, created[d.Bundle], "fluxd")
			}
			_ = st
			s.log = append(s.log, fmt.Sprintf("  fluxd: %s %s %s (%s)", d.Action, d.Stage, d.Bundle, d.Reason))
		}
		for _, stg := range p.Stages {
			n := 0
			for _, r := range s.recs {
				if r.Stage != stg.Name || !r.Current {
					continue
				}
				n++
				if stg.From == "" || r.PromotedBy != "fluxd" {
					continue
				}
				if from := s.find(stg.From, r.Bundle); from == nil || from.Status != Verified {
					t.Errorf("(a) %s runs %s, promoted by fluxd, not verified in %s", stg.Name, r.Bundle, stg.From)
				}
			}
			if n > 1 {
				t.Errorf("(d) %s has %d current bundles", stg.Name, n)
			}
		}
	}
	reached := map[Status]bool{}
	for _, r := range s.recs {
		reached[r.Status] = true
	}
	return reached
}

func joinLines(l []string) string {
	out := ""
	for _, s := range l {
		out += s + "\n"
	}
	return out
}
