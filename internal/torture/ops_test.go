package torture

import (
	"strings"
	"testing"
)

var formatServices = []Service{
	{Name: "a", Repo: "ra"}, {Name: "b", Repo: "rb"},
	{Name: "g", Repo: "rg", Format: Kustomize},
	{Name: "e", Repo: "re", Format: ImagePolicy},
	{Name: "h", Repo: "rh", Format: ImagePolicyBase},
	{Name: "i", Repo: "ri", Format: ImagePolicyList},
	{Name: "f", Repo: "rf", Format: HelmRelease},
}

// Every run, whatever its seed and length, has for each format a
// person's unlock of its service and, on the next step, a take-over of a
// release of a version pushed for it alone; nothing else changes the
// run's length (unless it is too short to hold them).
func TestGenerateSchedulesEveryFormat(t *testing.T) {
	for _, steps := range []int{1, 11, 12, 13, 40, 200} {
		for seed := int64(0); seed < 50; seed++ {
			ops := Generate(seed, steps, formatServices)
			want := steps
			if min := len(Scheduled) * len(Formats(formatServices)); want < min {
				want = min
			}
			if len(ops) != want {
				t.Fatalf("seed %d, %d steps: %d operations", seed, steps, len(ops))
			}
			took := map[Format]int{}
			phases := map[string]int{}
			pushed := map[string]bool{}
			for i, op := range ops {
				if op.Step != i+1 {
					t.Fatalf("seed %d: operation %d is step %d", seed, i+1, op.Step)
				}
				if op.Kind == PushTag {
					pushed[op.Repo+":"+op.Tag] = true
				}
				if op.Kind != Takeover {
					continue
				}
				s := svcOf(op.Service)
				took[s.Format]++
				if op.Repo != s.Repo || op.Replica != "leader" || pushed[op.Repo+":"+op.Tag] {
					t.Errorf("seed %d step %d: take-over %v: not a version of its own of %s", seed, op.Step, op, s.Repo)
				}
				pushed[op.Repo+":"+op.Tag] = true
				phases[op.Phase]++
				if i == 0 || ops[i-1].Kind != UnlockGit || ops[i-1].Service != op.Service {
					t.Errorf("seed %d step %d: take-over of %s not after an unlock of it", seed, op.Step, op.Service)
				}
			}
			if phases[PhaseRunning]+phases[PhaseApplied] != len(Formats(formatServices)) {
				t.Errorf("seed %d: take-overs' phases %v", seed, phases)
			}
			for _, f := range Formats(formatServices) {
				if took[f] != 1 {
					t.Errorf("seed %d, %d steps: %d take-overs of format %s; want 1", seed, steps, took[f], f.Name())
				}
			}
		}
	}
	if !strings.Contains(Generate(1, 40, formatServices)[0].String(), "  1 ") {
		t.Error("log line")
	}
}

func svcOf(name string) Service {
	for _, s := range formatServices {
		if s.Name == name {
			return s
		}
	}
	return Service{}
}
