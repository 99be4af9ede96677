package release

import (
	"context"
	"fmt"
	"strings"

	"github.com/fluxd/fluxd/gitrepo"
)

// stillReleased checks, before a taken-over job applies and follows its
// release, that git still holds it: the job's commit is in the branch (a
// force-push did not take it away) and every planned container is at its
// target (nobody reverted it while fluxd restarted). A job whose release
// git no longer holds must not report success. m is the branch's
// workloads, just fetched; the caller holds the git lock, so the branch
// checked is the one applied (applyFromGit).
func (e *Engine) stillReleased(ctx context.Context, plan *Plan, commit, jobID string, m *gitrepo.Manifests) error {
	if jobID != "" {
		found, err := e.repo.FindCommit(ctx, JobTrailer(jobID), 2000)
		if err != nil {
			return fmt.Errorf("looking for the commit in the branch: %w", err)
		}
		if found != commit {
			return fmt.Errorf("the branch no longer has commit %.12s (it was force-pushed away while fluxd restarted), so the release is not in git; nothing was applied. Look at the branch's history, then release again if it is still wanted", commit)
		}
	}
	var moved []string
	for _, it := range plan.Items {
		if it.Action != Update {
			continue
		}
		def, ok := m.Workloads[it.Service]
		if !ok {
			moved = append(moved, fmt.Sprintf("%s is no longer defined", it.Service))
			continue
		}
		for _, u := range it.Updates {
			for _, c := range def.Containers {
				if c.Name == u.Container && c.Image != u.Target {
					moved = append(moved, fmt.Sprintf("%s container %s is at %s, not %s", it.Service, c.Name, c.Image, u.Target))
				}
			}
		}
	}
	if len(moved) > 0 {
		return fmt.Errorf("git no longer holds the release (reverted or changed while fluxd restarted): %s; nothing was applied, and the sync applies git as it is", strings.Join(moved, "; "))
	}
	return nil
}
