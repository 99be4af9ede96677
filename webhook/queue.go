package webhook

import (
	"context"
	"sync"
	"time"
)

// Queue holds the repositories waiting for a refresh. In fluxd it is
// client-go's workqueue (workqueue.NewTyped[string](), wired by
// cmd/fluxd: only the binaries and adapters import client-go), which
// coalesces per key: a repository added while it waits is queued once,
// and one added while a worker has it (between Get and Done) is queued
// again once that worker is done.
type Queue interface {
	Add(repository string)
	Len() int
	Get() (repository string, shutdown bool)
	Done(repository string)
	ShutDown()
}

// Bounds on what senders can queue: the repositories are theirs to name,
// so the work they cause is capped.
const (
	// maxPending repositories may wait for a refresh; beyond, a
	// notification is answered 503 (the sender retries later).
	maxPending = 1000
	// maxPayloadRepositories are taken from one notification.
	maxPayloadRepositories = 100
)

const (
	// workers refresh that many repositories at once.
	workers = 4
	// refreshTimeout bounds one repository's refresh.
	refreshTimeout = 10 * time.Minute
)

// enqueue asks for a refresh of repository, of image the last notified.
// A repository already waiting is not queued twice; one being refreshed
// is refreshed once more after (the queue's coalescing). It returns false
// when maxPending repositories wait already.
func (h *Handler) enqueue(repository, image string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, waiting := h.pending[repository]; waiting {
		h.pending[repository] = image
		return true
	}
	if len(h.pending) >= maxPending {
		return false
	}
	h.pending[repository] = image
	h.queue.Add(repository)
	return true
}

// Run refreshes the repositories notified, a few at once, until ctx ends;
// then it shuts the queue down.
func (h *Handler) Run(ctx context.Context) {
	// Shutting down wakes the workers waiting in Get.
	stop := context.AfterFunc(ctx, h.queue.ShutDown)
	defer stop()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for h.processNext(ctx) {
			}
		})
	}
	wg.Wait()
}

// ProcessNext refreshes the next waiting repository, if one waits, and
// reports whether there was one. It is Run's step, for one caller at a
// time where no worker runs (a test).
func (h *Handler) ProcessNext(ctx context.Context) bool {
	if h.queue.Len() == 0 {
		return false
	}
	return h.processNext(ctx)
}

// processNext waits for a repository to refresh and refreshes it. It
// returns false once the queue is shut down or ctx ends.
func (h *Handler) processNext(ctx context.Context) bool {
	repo, shutdown := h.queue.Get()
	if shutdown {
		return false
	}
	defer h.queue.Done(repo)
	if ctx.Err() != nil {
		return false
	}
	h.mu.Lock()
	image, ok := h.pending[repo]
	delete(h.pending, repo)
	h.mu.Unlock()
	if !ok {
		return true
	}

	rctx, cancel := context.WithTimeout(ctx, refreshTimeout)
	err := h.refresh(rctx, image)
	cancel()
	if err != nil && ctx.Err() == nil {
		h.log.Warn("webhook: refreshing a notified repository failed", "repository", repo, "error", err)
	}
	return true
}
