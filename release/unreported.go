package release

import (
	"context"
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
	// Unattended, when set, says why no controller will act on them
	// (helmChecker), found Grace after the rollout started, before the
	// timeout.
	Unattended string
	Grace      time.Duration
}

func (e *NotRolledOut) Error() string {
	ids := make([]string, len(e.Services))
	for i, id := range e.Services {
		ids[i] = id.String()
	}
	if e.Unattended != "" {
		return fmt.Sprintf("committed and applied, not rolled out: nothing acted on %s within %v and %s; fluxd stopped waiting rather than wait out the rollout timeout of %v. Check with 'kubectl get helmrelease -n %s' and 'kubectl get pods -A -l app=helm-controller'; once a controller runs, it rolls the applied release out",
			strings.Join(ids, ", "), e.Grace, e.Unattended, e.Timeout, e.Services[0].Namespace)
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

// helmLook is a rollout's one answer from helmChecker.
type helmLook struct {
	asked bool
	why   string
	err   error
}

// helmChecker is a Cluster that can tell whether a Helm controller runs
// (platform/kube: a helm-controller or helm-operator pod in the cluster).
type helmChecker interface {
	// HelmControllerAbsent says why no Helm controller will act on a
	// HelmRelease; "" when one runs. An error says it cannot tell (it
	// may not list pods in every namespace).
	HelmControllerAbsent(ctx context.Context) (string, error)
}

// helmGrace is how long after a rollout starts fluxd asks whether a Helm
// controller runs, when the HelmReleases it applied are still below their
// generation: a running helm-controller marks a new generation in its
// conditions within seconds. Where the cluster cannot tell, fluxd waits
// helmQuiet instead, a time no idle controller takes to start on a
// HelmRelease. Each is at most half the rollout timeout.
const (
	helmGrace = 10 * time.Second
	helmQuiet = 6 * helmGrace
)

// unattended is a *NotRolledOut, before the timeout, when every workload
// of gens still rolling out is a HelmRelease nothing has acted on
// (unreported), and either the cluster says no Helm controller runs
// (after grace) or it cannot tell and quiet has passed; nil otherwise,
// and then fluxd waits as before. done says fluxd need not ask again.
func (e *Engine) unattended(ctx context.Context, ws []platform.Workload, gens map[platform.ID]int64, timeout, grace, since time.Duration, look *helmLook) (nr *NotRolledOut, done bool) {
	hc, ok := e.cluster.(helmChecker)
	if !ok {
		return nil, true
	}
	nr = unreported(ws, gens, timeout)
	if nr == nil {
		return nil, false
	}
	if !look.asked {
		// Asked once per rollout: an answer that it cannot tell does
		// not change while fluxd waits.
		look.asked = true
		look.why, look.err = hc.HelmControllerAbsent(ctx)
	}
	why, err := look.why, look.err
	quiet := min(grace*(helmQuiet/helmGrace), timeout/2)
	switch {
	case err == nil && why == "":
		return nil, true // one runs: wait for it
	case err == nil:
		nr.Unattended, nr.Grace = why, grace
		return nr, true
	case since < quiet:
		return nil, false
	default:
		nr.Unattended, nr.Grace = fmt.Sprintf("fluxd could not tell whether a Helm controller runs (%v)", err), quiet
		return nr, true
	}
}
