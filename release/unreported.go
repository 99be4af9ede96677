package release

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fluxd/fluxd/platform"
)

// StageNotRolledOut ends a job whose release was committed, pushed and
// applied, but whose rollout nothing reported on: a HelmRelease is rolled
// out by Flux's helm-controller, and where none runs (or it never got to
// it within the rollout timeout) its status never moves. The job is not
// failed (nothing went wrong that fluxd saw, and nothing is rolled back),
// and it does not claim a rollout either.
const StageNotRolledOut = "applied, not rolled out"

// NotRolledOut is a rollout no controller reported on within the rollout
// timeout: the workloads' status never reached the applied generation.
type NotRolledOut struct {
	Services []platform.ID
	Timeout  time.Duration
}

func (e *NotRolledOut) Error() string {
	ids := make([]string, len(e.Services))
	for i, id := range e.Services {
		ids[i] = id.String()
	}
	return fmt.Sprintf("committed and applied, not rolled out: nothing reported on the rollout of %s within %v (its status never reached the applied generation; is Flux's helm-controller running and reconciling it? check with 'kubectl get helmrelease -n %s')",
		strings.Join(ids, ", "), e.Timeout, e.Services[0].Namespace)
}

// unreported is a *NotRolledOut when every workload of gens that has not
// rolled out is a HelmRelease whose status is still below its applied
// generation with no failure reported; nil otherwise, and then the
// rollout failed as any other.
func unreported(ws []platform.Workload, gens map[platform.ID]int64, timeout time.Duration) *NotRolledOut {
	var ids []platform.ID
	for _, w := range ws {
		gen, ok := gens[w.ID]
		if !ok || w.RolledOut(gen) {
			continue
		}
		if w.ID.Kind != platform.KindHelmRelease || w.ObservedGeneration >= gen || w.Stuck != "" {
			return nil
		}
		ids = append(ids, w.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	slices.SortFunc(ids, platform.ID.Compare)
	return &NotRolledOut{Services: ids, Timeout: timeout}
}
