package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/fluxd/fluxd/daemon"
	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/platform"
	"github.com/fluxd/fluxd/promotion"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
	"github.com/fluxd/fluxd/release/jobs"
	"github.com/fluxd/fluxd/webhook"
)

// The promotion loop's wiring: its ports are the release engine and
// queue, the daemon's joined view, the registry (for digests), the
// history store (its tables, its events) and the gates' adapters.

// releaser is the engine's planning with the queue's jobs.
type releaser struct {
	engine *release.Engine
	queue  *jobs.Queue
}

func (r releaser) Plan(ctx context.Context, spec release.Spec) (*release.Plan, error) {
	return r.engine.Plan(ctx, spec)
}

func (r releaser) Enqueue(ctx context.Context, instance string, spec release.Spec, checksum string) (jobs.JobUpdate, error) {
	return r.queue.Enqueue(ctx, instance, spec, checksum)
}

func (r releaser) Get(ctx context.Context, instance, id string) (jobs.JobUpdate, error) {
	return r.queue.Get(ctx, instance, id)
}

// viewOf is the daemon's view as the loop's Cluster, bound once the
// daemon is made (it serves the loop's calls, so it is made after it).
type viewOf func() *daemon.Daemon

func (v viewOf) Running(ctx context.Context, ids []platform.ID) ([]promotion.Running, error) {
	d := v()
	if d == nil {
		return nil, fmt.Errorf("fluxd is still starting")
	}
	return d.Running(ctx, ids)
}

// tagDigests reads a tag's digest through the registry client's cache,
// and with one manifest HEAD for a tag the cache has not listed yet.
type tagDigests struct{ images release.Images }

func (t tagDigests) Digest(ctx context.Context, image string) (string, error) {
	ref, err := registry.ParseRef(image)
	if err != nil {
		return "", err
	}
	imgs, err := t.images.ImagesMatching(ctx, ref.Repository, func(tag string) bool { return tag == ref.Tag })
	if err != nil {
		return "", err
	}
	for _, img := range imgs {
		if img.Tag == ref.Tag && img.Digest != "" {
			return img.Digest, nil
		}
	}
	// A tag pushed since the cache last listed the repository (a
	// release of a new build just rolled out): one manifest HEAD.
	if h, ok := t.images.(interface {
		HeadDigest(ctx context.Context, ref string) (string, error)
	}); ok {
		if d, err := h.HeadDigest(ctx, image); err == nil && d != "" {
			return d, nil
		}
	}
	return "", fmt.Errorf("the registry has no digest for %s (is the tag still there?)", image)
}

// promotionInstance is the instance an automatic promotion's job and
// events are kept under: the one instance whose scope holds every
// service of the stage, else "default" (as the automator does).
func promotionInstance(tokens *auth.Store) func([]platform.ID) string {
	return func(ids []platform.ID) string {
		// A stage has no definitions at hand: its services are held by
		// namespace, as InScope holds a service only in the cluster.
		return release.SoleInstance(tokens.Instances(), func(sc *auth.Scope) bool {
			for _, id := range ids {
				if !release.InScope(sc, id, nil, nil) {
					return false
				}
			}
			return true
		}, "default")
	}
}

// The controller is what the daemon and the approval webhook serve.
var (
	_ daemon.Promotions = (*promotion.Controller)(nil)
	_ webhook.Approver  = (*promotion.Controller)(nil)
)

// noticeTypes maps the controller's notices to history's event types.
var noticeTypes = map[string]history.Type{
	"promoted":          history.Promoted,
	"rolled back":       history.Promoted,
	"verified":          history.Verified,
	"failed":            history.PromotionFailed,
	"awaiting approval": history.AwaitingApproval,
	"approved":          history.Approved,
	"paused":            history.PromotionPaused,
	"resumed":           history.PromotionResumed,
}

// recordNotices writes the controller's notices to history (and so to
// the notifications' outbox, in the same transaction).
func recordNotices(rec interface {
	Record(context.Context, history.Event) (int64, error)
}, instance func([]platform.ID) string, log *slog.Logger) func(context.Context, promotion.Notice) {
	return func(ctx context.Context, n promotion.Notice) {
		typ, ok := noticeTypes[n.What]
		if !ok {
			return // soaking, rolled out, running, superseded: shown, not recorded
		}
		ev := history.Event{Instance: instance(n.Services), Type: typ, User: n.By, Message: fmt.Sprintf("%s: %s", n.Pipeline, n.Text), Job: n.Job,
			StartedAt: time.Now(), EndedAt: time.Now()}
		if ev.User == "" {
			ev.User = promotion.Automatic
		}
		for _, id := range n.Services {
			ev.Services = append(ev.Services, id.String())
		}
		if typ == history.PromotionFailed {
			ev.Error = n.Text
		}
		if _, err := rec.Record(ctx, ev); err != nil {
			log.Warn("recording a promotion event", "pipeline", n.Pipeline, "stage", n.Stage, "error", err)
		}
	}
}

// loadPipelines reads the Pipelines under --git-path at each revision
// git moves to (and once at start), for the controller. It runs on
// every replica: followers answer 'fluxctl stages' from the store too.
func loadPipelines(ctx context.Context, engine *release.Engine, ctrl *promotion.Controller, log *slog.Logger) {
	moved := make(chan struct{}, 1)
	engine.OnRevision(func(string) {
		select {
		case moved <- struct{}{}:
		default:
		}
	})
	last := ""
	for {
		err := engine.Read(ctx, false, false, func(rev, root string, paths []string) error {
			if rev == last {
				return nil
			}
			dirs, err := gitrepo.ResolvePaths(root, paths)
			if err != nil {
				return err
			}
			ps, problems, err := promotion.Load(root, dirs)
			if err != nil {
				return err
			}
			ctrl.SetPipelines(ps, problems)
			last = rev
			return nil
		})
		if err != nil && ctx.Err() == nil {
			log.Warn("reading the Pipelines in git", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-moved:
		case <-time.After(time.Minute):
		}
	}
}

// noticeHooks tells others of the loop's notices, after history has
// them: the status page's event stream (startWeb) hooks in here.
type noticeHooks struct {
	mu sync.Mutex
	fs []func(promotion.Notice)
}

// On adds f; it is called on the loop's goroutine, and must not block.
func (h *noticeHooks) On(f func(promotion.Notice)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fs = append(h.fs, f)
}

func (h *noticeHooks) tell(n promotion.Notice) {
	h.mu.Lock()
	fs := h.fs
	h.mu.Unlock()
	for _, f := range fs {
		f(n)
	}
}

// newPromotion builds the promotion loop; it runs on the leader (and
// reads pipelines on every replica). hooks hear of its notices.
func newPromotion(engine *release.Engine, queue *jobs.Queue, d promotion.Cluster, images release.Images, store history.Store, checker promotion.Checker, tokens *auth.Store, hooks *noticeHooks, log *slog.Logger) *promotion.Controller {
	inst := promotionInstance(tokens)
	record := recordNotices(store, inst, log)
	return promotion.New(promotion.Config{
		Store:    promotion.NewStore(store),
		Releaser: releaser{engine: engine, queue: queue},
		Cluster:  d,
		Digests:  tagDigests{images: images},
		Checker:  checker,
		Instance: inst,
		Notice:   func(ctx context.Context, n promotion.Notice) { record(ctx, n); hooks.tell(n) },
		Log:      log.With("component", "promotion"),
	})
}
