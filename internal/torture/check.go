package torture

import (
	"fmt"
	"sort"
	"strings"
)

// The checks, by letter.
const (
	CheckPlan      = "a" // fluxd's commits are exactly their plans
	CheckLocked    = "b" // fluxd never changed a locked service
	CheckPersons   = "c" // every person's commit is in the branch
	CheckSettled   = "d" // no job is left queued or running
	CheckOutcome   = "e" // each job's outcome matches git and the cluster
	CheckHistory   = "f" // one history row per job outcome
	CheckReached   = "g" // fluxd committed in every format
	AllChecks      = "abcdefg"
	revertPrefix   = "Revert release "
	policyTrailer  = "policy-"
	typeRelease    = "release"
	typeAutomated  = "automated-release"
	stateSucceeded = "succeeded"
	// stageNotRolledOut is release.StageNotRolledOut.
	stageNotRolledOut = "applied, not rolled out"
)

// Violation is one broken invariant.
type Violation struct {
	Check string
	What  string
}

func (v Violation) String() string { return "(" + v.Check + ") " + v.What }

// Check runs every checker on o, in order.
func Check(o *Observation) []Violation {
	var out []Violation
	for _, c := range []func(*Observation) []Violation{CheckCommitsArePlans, CheckNoLockedChange, CheckPersonsKept, CheckJobsSettled, CheckOutcomes, CheckHistoryRows, CheckFormatsReached} {
		out = append(out, c(o)...)
	}
	return out
}

func (o *Observation) jobs() map[string]Job {
	m := map[string]Job{}
	for _, j := range o.Jobs {
		m[j.ID] = j
	}
	return m
}

// fluxdCommits are the reachable commits fluxd made, oldest first.
func (o *Observation) fluxdCommits() []*Commit {
	var out []*Commit
	for _, h := range o.Order {
		if c := o.Commits[h]; c.Committer == o.FluxdCommitter {
			out = append(out, c)
		}
	}
	return out
}

func (o *Observation) parentWorkloads(c *Commit) map[string]Workload {
	if len(c.Parents) == 0 {
		return nil
	}
	if p, ok := o.Commits[c.Parents[0]]; ok {
		return p.Workloads
	}
	return nil
}

// revertedJob returns the job whose commit a revert commit names.
func (o *Observation) revertedJob(c *Commit) (Job, string, bool) {
	rest, ok := strings.CutPrefix(c.Subject(), revertPrefix)
	if !ok {
		return Job{}, "", false
	}
	short, _, _ := strings.Cut(rest, " ")
	for _, j := range o.Jobs {
		if j.Commit != "" && strings.HasPrefix(j.Commit, short) {
			return j, short, true
		}
	}
	return Job{}, short, true
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func fmtUpdates(us []Update) string {
	if len(us) == 0 {
		return "nothing"
	}
	var s []string
	for _, u := range us {
		s = append(s, u.String())
	}
	return strings.Join(s, "; ")
}

func sameUpdates(a, b []Update) bool {
	a, b = append([]Update(nil), a...), append([]Update(nil), b...)
	sortUpdates(a)
	sortUpdates(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// CheckCommitsArePlans is (a): a release commit (one with a Fluxd-Job
// trailer) changes exactly its job's recorded plan, from → to, and
// nothing else; a revert changes exactly its job's plan inverted; any
// other fluxd commit (a policy change) changes no image and the
// annotations of one service at most.
func CheckCommitsArePlans(o *Observation) []Violation {
	var out []Violation
	jobs := o.jobs()
	bad := func(c *Commit, f string, args ...any) {
		out = append(out, Violation{CheckPlan, fmt.Sprintf("commit %s %q: ", short(c.Hash), c.Subject()) + fmt.Sprintf(f, args...)})
	}
	for _, c := range o.fluxdCommits() {
		if len(c.Parents) != 1 {
			bad(c, "fluxd made a commit with %d parents", len(c.Parents))
			continue
		}
		got, other := Diff(o.parentWorkloads(c), c.Workloads)
		id := c.JobTrailer()
		if _, ok := jobs[id]; !ok && strings.HasPrefix(id, policyTrailer) {
			id = "" // a policy commit's own trailer, to find a push whose reply was lost
		}
		switch {
		case id != "":
			j, ok := jobs[id]
			if !ok {
				bad(c, "names job %s, which the history database does not hold", id)
				continue
			}
			if !sameUpdates(got, j.Updates) {
				bad(c, "changes %s; job %s's recorded plan is %s", fmtUpdates(got), id, fmtUpdates(j.Updates))
			}
			if len(other) > 0 {
				bad(c, "a release commit also changes %s", strings.Join(other, ", "))
			}
		case strings.HasPrefix(c.Subject(), revertPrefix):
			j, sh, _ := o.revertedJob(c)
			if j.ID == "" {
				bad(c, "reverts %s, which no job recorded as its commit", sh)
				continue
			}
			var want []Update
			for _, u := range j.Updates {
				want = append(want, Update{Service: u.Service, Container: u.Container, From: u.To, To: u.From})
			}
			if !sameUpdates(got, want) {
				bad(c, "changes %s; the revert of job %s's plan is %s", fmtUpdates(got), j.ID, fmtUpdates(want))
			}
			if len(other) > 0 {
				bad(c, "a revert also changes %s", strings.Join(other, ", "))
			}
		default:
			if len(got) > 0 {
				bad(c, "a fluxd commit of no job changes images: %s", fmtUpdates(got))
			}
			if len(other) > 1 {
				bad(c, "a policy commit changes several services: %s", strings.Join(other, ", "))
			}
		}
	}
	return out
}

// CheckNoLockedChange is (b): no fluxd commit changes an image of a
// service that its parent commit locks (LockedIn: a Deployment by its
// annotation; an ImagePolicy's marked fields by the ImagePolicy's
// annotation or by the lock of a workload holding one of them).
func CheckNoLockedChange(o *Observation) []Violation {
	var out []Violation
	for _, c := range o.fluxdCommits() {
		parent := o.parentWorkloads(c)
		got, _ := Diff(parent, c.Workloads)
		seen := map[string]bool{}
		for _, u := range got {
			if locked, why := LockedIn(parent, u.Service); locked && !seen[u.Service] {
				seen[u.Service] = true
				out = append(out, Violation{CheckLocked, fmt.Sprintf("commit %s %q changes %s, which its parent %s locks (%s)",
					short(c.Hash), c.Subject(), fmtUpdates([]Update{u}), short(c.Parents[0]), why)})
			}
		}
	}
	return out
}

func lockNote(w Workload) string {
	var s []string
	for _, k := range []string{"fluxd.io/lock-message", "fluxd.io/locked-by"} {
		if v := w.Annotations[k]; v != "" {
			s = append(s, k+"="+v)
		}
	}
	if len(s) == 0 {
		return "locked by hand in git"
	}
	return strings.Join(s, ", ")
}

// CheckPersonsKept is (c): every commit a person pushed is reachable
// from the head.
func CheckPersonsKept(o *Observation) []Violation {
	var out []Violation
	for _, h := range o.PersonCommits {
		if _, ok := o.Commits[h]; !ok {
			out = append(out, Violation{CheckPersons, fmt.Sprintf("a person's commit %s is not an ancestor of the head %s: it was lost", short(h), short(o.Head))})
		}
	}
	return out
}

// CheckJobsSettled is (d): every job has ended.
func CheckJobsSettled(o *Observation) []Violation {
	var out []Violation
	for _, j := range o.Jobs {
		if j.State == "queued" || j.State == "running" {
			out = append(out, Violation{CheckSettled, fmt.Sprintf("job %s (user %s, plan %s) is still %s after the run settled", j.ID, j.User, fmtUpdates(j.Updates), j.State)})
		}
	}
	return out
}

// CheckOutcomes is (e): a job that records a commit has exactly that one
// commit in the branch, carrying its trailer; a job that records none
// has none; a job that succeeded without a commit had nothing to do; and
// the cluster runs what the head says (every Deployment's images, the
// values of marked image fields included).
func CheckOutcomes(o *Observation) []Violation {
	var out []Violation
	bad := func(f string, args ...any) { out = append(out, Violation{CheckOutcome, fmt.Sprintf(f, args...)}) }
	byTrailer := map[string][]string{}
	for _, h := range o.Order {
		if id := o.Commits[h].JobTrailer(); id != "" {
			byTrailer[id] = append(byTrailer[id], h)
		}
	}
	for _, j := range o.Jobs {
		in := byTrailer[j.ID]
		switch {
		case len(in) > 1:
			bad("job %s has %d commits in the branch (%s); want at most one", j.ID, len(in), strings.Join(in, ", "))
		case j.Commit == "" && len(in) == 1:
			bad("job %s ended %s recording no commit, but commit %s in the branch is its (%s)", j.ID, j.State, short(in[0]), firstLine(j.Error))
		case j.Commit != "" && len(in) == 0:
			if _, ok := o.Commits[j.Commit]; ok {
				bad("job %s records commit %s, which lacks its trailer", j.ID, short(j.Commit))
			} else {
				bad("job %s ended %s recording commit %s, which is not in the branch", j.ID, j.State, short(j.Commit))
			}
		case j.Commit != "" && in[0] != j.Commit:
			bad("job %s records commit %s, but its commit in the branch is %s", j.ID, short(j.Commit), short(in[0]))
		}
		if j.State == stateSucceeded && j.Commit == "" && len(j.Updates) > 0 {
			bad("job %s succeeded with no commit, but its plan changes %s", j.ID, fmtUpdates(j.Updates))
		}
		if o.HelmUnreported && j.State == stateSucceeded && j.Commit != "" {
			out = append(out, notRolledOut(o, j)...)
		}
	}
	if o.Cluster != nil && o.Head != "" {
		head := o.Commits[o.Head]
		ids := make([]string, 0, len(head.Workloads))
		for id := range head.Workloads {
			if strings.Contains(id, ":deployment/") || strings.Contains(id, ":helmrelease/") { // an ImagePolicy's fields reach it through its holders
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			want := head.Workloads[id].Images
			got, ok := o.Cluster[id]
			if !ok {
				bad("%s is in git but not in the cluster", id)
				continue
			}
			for c, img := range want {
				if got[c] != img {
					bad("%s container %s runs %s in the cluster; git's head %s says %s", id, c, got[c], short(o.Head), img)
				}
			}
		}
	}
	return out
}

// notRolledOut judges a job that succeeded with a commit where no Helm
// controller runs: it ends "applied, not rolled out" in its stage exactly
// when its plan moves a HelmRelease; its one release row says so exactly
// then too, and of an automated batch's rows (one per service), exactly
// the HelmReleases' rows do.
func notRolledOut(o *Observation, j Job) []Violation {
	var out []Violation
	bad := func(f string, args ...any) { out = append(out, Violation{CheckOutcome, fmt.Sprintf(f, args...)}) }
	var helm []string
	for _, s := range j.Services() {
		if strings.Contains(s, ":helmrelease/") {
			helm = append(helm, s)
		}
	}
	moves := len(helm) > 0
	if says := j.Stage == stageNotRolledOut; moves && !says {
		bad("job %s moved %s, which no Helm controller rolls out here, but it ended at stage %q, not %q", j.ID, strings.Join(helm, ", "), j.Stage, stageNotRolledOut)
	} else if !moves && says {
		bad("job %s moved no HelmRelease (%s), but it ended %q", j.ID, fmtUpdates(j.Updates), stageNotRolledOut)
	}
	var rows []Event
	for _, ev := range o.Events {
		if ev.Commit == j.Commit && (ev.Type == typeRelease || ev.Type == typeAutomated) {
			rows = append(rows, ev)
		}
	}
	for _, ev := range rows {
		rowHelm := moves
		if len(rows) > 1 {
			rowHelm = false
			for _, s := range ev.Services {
				rowHelm = rowHelm || strings.Contains(s, ":helmrelease/")
			}
		}
		if says := strings.Contains(ev.Message, "not rolled out"); rowHelm && !says {
			bad("history row %d of job %s (%s) claims a rollout of %s, which no Helm controller rolls out here: %q", ev.ID, j.ID, strings.Join(ev.Services, ","), strings.Join(helm, ", "), ev.Message)
		} else if !rowHelm && says {
			bad("history row %d of job %s (%s) says not rolled out, but it moved no HelmRelease: %q", ev.ID, j.ID, strings.Join(ev.Services, ","), ev.Message)
		}
	}
	return out
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	if len(l) > 160 {
		l = l[:160] + "…"
	}
	return l
}

// CheckHistoryRows is (f): a job that succeeded with a commit has one
// release row with that commit (an automated batch one per service); a
// job that failed or was cancelled has one row of that type, with its
// commit when it pushed; and no release, failure or cancel row lacks a
// job.
func CheckHistoryRows(o *Observation) []Violation {
	var out []Violation
	bad := func(f string, args ...any) { out = append(out, Violation{CheckHistory, fmt.Sprintf(f, args...)}) }
	outcome := func(t string) bool {
		return t == typeRelease || t == typeAutomated || t == "failed" || t == "cancelled"
	}
	byCommit := map[string][]Event{}
	type key struct{ typ, user string }
	noCommitEvents := map[key]int{}
	for _, ev := range o.Events {
		if !outcome(ev.Type) {
			continue
		}
		if ev.Commit != "" {
			byCommit[ev.Commit] = append(byCommit[ev.Commit], ev)
		} else if ev.Type == "failed" || ev.Type == "cancelled" {
			noCommitEvents[key{ev.Type, ev.User}]++
		} else {
			bad("history row %d (%s by %s) records a release without a commit", ev.ID, ev.Type, ev.User)
		}
	}
	noCommitJobs := map[key][]string{}
	jobCommits := map[string]bool{}
	for _, j := range o.Jobs {
		if j.State == "queued" || j.State == "running" {
			continue
		}
		if j.Commit == "" {
			if j.State != stateSucceeded {
				k := key{j.State, j.User}
				noCommitJobs[k] = append(noCommitJobs[k], j.ID)
			}
			continue
		}
		jobCommits[j.Commit] = true
		count := map[string]int{}
		for _, ev := range byCommit[j.Commit] {
			count[ev.Type]++
		}
		if j.State == stateSucceeded {
			want := 1
			if j.Automated && len(j.Services()) > 1 {
				want = len(j.Services())
			}
			if n := count[typeRelease] + count[typeAutomated]; n != want {
				bad("job %s succeeded with commit %s: %d release rows name it; want %d", j.ID, short(j.Commit), n, want)
			}
			if n := count["failed"] + count["cancelled"]; n != 0 {
				bad("job %s succeeded with commit %s, but %d failure or cancel rows name it", j.ID, short(j.Commit), n)
			}
			continue
		}
		if n := count[j.State]; n != 1 {
			bad("job %s ended %s with commit %s: %d %s rows name it; want 1", j.ID, j.State, short(j.Commit), n, j.State)
		}
		if n := count[typeRelease] + count[typeAutomated]; n != 0 {
			bad("job %s ended %s with commit %s, but %d release rows name it", j.ID, j.State, short(j.Commit), n)
		}
	}
	var orphans []string
	for c := range byCommit {
		if !jobCommits[c] {
			orphans = append(orphans, c)
		}
	}
	sort.Strings(orphans)
	for _, c := range orphans {
		ev := byCommit[c][0]
		where := "which is not in the branch either"
		if _, ok := o.Commits[c]; ok {
			where = "which is in the branch: the push it records as failed landed"
		}
		bad("history row %d (%s, by %s, %s) names commit %s, which no job recorded, %s: %s",
			ev.ID, ev.Type, ev.User, strings.Join(ev.Services, ","), short(c), where, firstLine(ev.Error))
	}
	keys := map[key]bool{}
	for k := range noCommitJobs {
		keys[k] = true
	}
	for k := range noCommitEvents {
		keys[k] = true
	}
	var ks []key
	for k := range keys {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].user+ks[i].typ < ks[j].user+ks[j].typ })
	hasJobs := map[string]bool{}
	for _, j := range o.Jobs {
		hasJobs[j.User] = true
	}
	for _, k := range ks {
		if !hasJobs[k.user] {
			// Not a job's row: a policy change that failed before its
			// push (a lock refused because the branch moved), which is
			// recorded as failed with no commit. (f) is about jobs.
			continue
		}
		if jobs, rows := noCommitJobs[k], noCommitEvents[k]; len(jobs) != rows {
			bad("%d jobs of %s ended %s without a commit (%s) but history has %d %s rows of %s without one", len(jobs), k.user, k.typ, strings.Join(jobs, ", "), rows, k.typ, k.user)
		}
	}
	return out
}

// FormatCommits counts, by format, the fluxd commits reachable from the
// head that move an image of a service of that format (o.Formats). A
// commit that moves two formats counts for each. Every format of
// o.Formats is in the map, with 0 when no commit moved it.
func FormatCommits(o *Observation) map[Format]int {
	n := map[Format]int{}
	for _, f := range o.Formats {
		n[f] += 0
	}
	for _, c := range o.fluxdCommits() {
		parent := o.parentWorkloads(c)
		if parent == nil {
			continue
		}
		ups, _ := Diff(parent, c.Workloads)
		moved := map[Format]bool{}
		for _, u := range ups {
			if f, ok := o.Formats[u.Service]; ok {
				moved[f] = true
			}
		}
		for f := range moved {
			n[f]++
		}
	}
	return n
}

// CheckFormatsReached is (g): every format of the run (o.Formats) has at
// least one fluxd commit in the branch that moves one of its services.
// A format that drew none was judged by none of the other checks: a run
// that never released a HelmRelease says nothing about HelmReleases.
func CheckFormatsReached(o *Observation) []Violation {
	var out []Violation
	n := FormatCommits(o)
	var fs []Format
	for f := range n {
		fs = append(fs, f)
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i] < fs[j] })
	for _, f := range fs {
		if n[f] == 0 {
			var svcs []string
			for id, g := range o.Formats {
				if g == f {
					svcs = append(svcs, id)
				}
			}
			sort.Strings(svcs)
			out = append(out, Violation{CheckReached, fmt.Sprintf("no fluxd commit in the branch moves a service of format %s (%s): the other checks judged nothing of it", f.Name(), strings.Join(svcs, ", "))})
		}
	}
	return out
}

// Enforced splits violations into those of the checks listed in enforce
// (letters, e.g. "acdf") and the rest.
func Enforced(vs []Violation, enforce string) (enforced, reported []Violation) {
	for _, v := range vs {
		if strings.Contains(enforce, v.Check) {
			enforced = append(enforced, v)
		} else {
			reported = append(reported, v)
		}
	}
	return enforced, reported
}
