package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/registry"
)

// Counts are what Copy copied.
type Counts struct {
	Events, Jobs, JobLogLines, Repositories, Tags int
	// Promotion's rows: bundles, per-stage records and pauses.
	Bundles, PromotionRecords, Pauses int
	// VerificationResults are image signature verification results.
	VerificationResults int
}

// ErrTargetNotEmpty says Copy's target already holds records.
var ErrTargetNotEmpty = errors.New("the target database is not empty")

var errStop = errors.New("stop")

// Copy copies every event, job (with its log), cached registry tag,
// promotion row and image signature verification result from one store to another, oldest first, so that order
// (event IDs, job sequence) is kept; IDs themselves are the target's,
// and so are promotion records' versions, which start again at 1 (no
// fluxd writes to the target before the copy ends). The target must be empty: copying
// into records of their own would mix two histories and double whatever
// both hold. It is not one transaction: a copy that fails midway leaves
// the target partly filled, and says so.
func Copy(ctx context.Context, from, to Store) (Counts, error) {
	var n Counts
	if err := empty(ctx, to); err != nil {
		return n, err
	}
	err := from.EachEvent(ctx, func(ev history.Event) error {
		if _, err := to.Record(ctx, ev); err != nil {
			return err
		}
		n.Events++
		return nil
	})
	if err == nil {
		err = from.EachJob(ctx, func(j history.Job) error {
			if _, err := to.SaveJob(ctx, j); err != nil {
				return err
			}
			n.Jobs++
			// JobLog answers in pages of MaxJobLogLines.
			for after := int64(0); ; {
				lines, err := from.JobLog(ctx, j.Instance, j.ID, after)
				if err != nil {
					return err
				}
				for _, l := range lines {
					if err := to.AppendJobLog(ctx, l); err != nil {
						return err
					}
					n.JobLogLines++
					after = l.Seq
				}
				if len(lines) < history.MaxJobLogLines {
					return nil
				}
			}
		})
	}
	if err == nil {
		err = copyCache(ctx, from, to, &n)
	}
	if err == nil {
		err = copyPromotions(ctx, from, to, &n)
	}
	if err == nil {
		err = from.EachVerificationResult(ctx, func(r history.VerificationResult) error {
			if err := to.SaveVerificationResult(ctx, r); err != nil {
				return err
			}
			n.VerificationResults++
			return nil
		})
	}
	if err != nil {
		return n, fmt.Errorf("copying stopped after %d events, %d jobs, %d cached tags and %d promotion bundles, which the target now holds (empty it before copying again): %w", n.Events, n.Jobs, n.Tags, n.Bundles, err)
	}
	return n, nil
}

func copyCache(ctx context.Context, from, to Store, n *Counts) error {
	repos, err := from.CachedRepositories(ctx)
	if err != nil {
		return err
	}
	for _, repo := range repos {
		cached, err := from.CachedTags(ctx, repo)
		if err != nil {
			return err
		}
		tags := make(map[string]registry.TagState, len(cached))
		images := map[string]registry.ImageMeta{}
		for tag, ct := range cached {
			tags[tag] = registry.TagState{Digest: ct.Digest, Stable: ct.Stable, NextCheck: ct.NextCheck}
			if ct.HasCreated {
				images[ct.Digest] = registry.ImageMeta{CreatedAt: ct.CreatedAt, ConfigDigest: ct.ConfigDigest, Platform: ct.Platform, Labels: ct.Labels}
			}
		}
		if err := to.SaveTags(ctx, repo, tags, images, nil); err != nil {
			return err
		}
		// Its tag list too, so that the new store's first fluxd does not
		// list the repository again while the list is fresh. (A list of
		// a repository with no cached tag is not copied: it is read
		// again, which costs one request.)
		if l, ok, err := from.TagList(ctx, repo); err != nil {
			return err
		} else if ok {
			if err := to.SaveTagList(ctx, repo, l); err != nil {
				return err
			}
		}
		n.Repositories++
		n.Tags += len(tags)
	}
	return nil
}

func copyPromotions(ctx context.Context, from, to Store, n *Counts) error {
	pipelines, err := from.PromotionPipelines(ctx)
	if err != nil {
		return err
	}
	for _, p := range pipelines {
		bundles, err := from.PromotionBundles(ctx, p)
		if err != nil {
			return err
		}
		for _, b := range bundles {
			if err := to.SavePromotionBundle(ctx, b); err != nil {
				return err
			}
			n.Bundles++
		}
		recs, err := from.PromotionRecords(ctx, p)
		if err != nil {
			return err
		}
		for _, r := range recs {
			r.Version = 0
			if _, err := to.PutPromotionRecord(ctx, r); err != nil {
				return err
			}
			n.PromotionRecords++
		}
		pauses, err := from.PromotionPauses(ctx, p)
		if err != nil {
			return err
		}
		for _, pz := range pauses {
			if err := to.SetPromotionPause(ctx, pz); err != nil {
				return err
			}
			n.Pauses++
		}
	}
	return nil
}

// empty returns ErrTargetNotEmpty, with what s holds, unless s holds
// nothing.
func empty(ctx context.Context, s Store) error {
	var held []string
	if err := s.EachEvent(ctx, func(history.Event) error { return errStop }); errors.Is(err, errStop) {
		held = append(held, "events")
	} else if err != nil {
		return err
	}
	if err := s.EachJob(ctx, func(history.Job) error { return errStop }); errors.Is(err, errStop) {
		held = append(held, "jobs")
	} else if err != nil {
		return err
	}
	repos, err := s.CachedRepositories(ctx)
	if err != nil {
		return err
	}
	if len(repos) > 0 {
		held = append(held, "registry cache entries")
	}
	pipelines, err := s.PromotionPipelines(ctx)
	if err != nil {
		return err
	}
	if len(pipelines) > 0 {
		held = append(held, "promotion state")
	}
	if err := s.EachVerificationResult(ctx, func(history.VerificationResult) error { return errStop }); errors.Is(err, errStop) {
		held = append(held, "verification results")
	} else if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("%w: it holds %v. fluxd db copy copies into an empty database only, so that no two histories are mixed and nothing is copied twice: point --to at a new database (or drop and recreate this one)", ErrTargetNotEmpty, held)
	}
	return nil
}
