package release

import (
	"context"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/platform"
)

// record writes the history rows of a pushed release that ended
// succeeded (or not rolled out, unrolled naming the workloads nothing
// reported on). A failure to record is logged: the release stands.
func (r *run) record(ctx context.Context, res *Result, unrolled []platform.ID) {
	ev := event(r.instance, r.spec, res.Plan, r.typ, r.start)
	ev.Commit = res.Commit
	// An automated batch is one commit, but each service gets a history
	// row of its own, naming the images that triggered its release.
	evs := []history.Event{ev}
	if r.typ == history.AutomatedRelease && len(ev.Services) > 1 {
		evs = perService(ev, r.spec, res.Plan)
	}
	if res.NotRolledOut != "" {
		notRolledOutRows(evs, unrolled, res.NotRolledOut)
	}
	for _, ev := range evs {
		if _, err := r.e.recorder.Record(ctx, ev); err != nil {
			r.e.log.Error("recording the release in history failed", "error", err, "commit", res.Commit)
		}
	}
}

// notRolledOutRows appends note to the rows that name a service nothing
// reported on: in a batch, those services' own rows (a Deployment that
// rolled out beside them does not say it was not), else every row (the
// one row of a release; a batch whose unreported workload is no service
// of its own, such as a HelmRelease an ImagePolicy's marker sets).
func notRolledOutRows(evs []history.Event, unrolled []platform.ID, note string) {
	var rows []int
	for i := range evs {
		if len(evs) > 1 && namesAny(evs[i].Services, unrolled) {
			rows = append(rows, i)
		}
	}
	if len(rows) == 0 {
		for i := range evs {
			rows = append(rows, i)
		}
	}
	for _, i := range rows {
		evs[i].Message += "; " + note
	}
}

// namesAny reports whether services (IDs as history keeps them) holds
// one of ids.
func namesAny(services []string, ids []platform.ID) bool {
	for _, id := range ids {
		for _, s := range services {
			if s == id.String() {
				return true
			}
		}
	}
	return false
}

// perService splits an event into one per service, each with its own
// changes.
func perService(ev history.Event, spec Spec, plan *Plan) []history.Event {
	var out []history.Event
	for _, svc := range ev.Services {
		one := ev
		one.Services, one.Changes = []string{svc}, nil
		for _, it := range plan.Items {
			if it.Service.String() == svc && spec.Automated {
				one.Message = AutomatedMessage([]Item{it})
			}
		}
		for _, c := range ev.Changes {
			if c.Service == svc {
				one.Changes = append(one.Changes, c)
			}
		}
		out = append(out, one)
	}
	return out
}
