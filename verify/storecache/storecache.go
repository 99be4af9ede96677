// Package storecache keeps verification results (verify.Cache) in the
// history store, so that the replicas sharing it verify a digest once.
// It sits below verify and history, which do not import each other;
// cmd/fluxd wires it in behind verify.Cached's memory cache.
package storecache

import (
	"context"
	"errors"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/verify"
)

// Cache is a verify.Cache over a store's verification results.
type Cache struct {
	Store history.VerificationResults
}

var _ verify.Cache = Cache{}

// Get returns the result the store keeps for k.
func (c Cache) Get(ctx context.Context, k verify.CacheKey) (verify.Entry, bool, error) {
	r, err := c.Store.VerificationResult(ctx, k.Repository, k.Digest, k.Profile)
	if errors.Is(err, history.ErrNotFound) {
		return verify.Entry{}, false, nil
	}
	if err != nil {
		return verify.Entry{}, false, err
	}
	return verify.Entry{
		Result: verify.Result{Digest: k.Digest, Outcome: verify.Outcome(r.Outcome), Signer: r.Signer,
			Reason: verify.Reason(r.Reason), Detail: r.Detail},
		CheckedAt: r.CheckedAt,
	}, true, nil
}

// Put keeps e for k; a final result the store keeps stays.
func (c Cache) Put(ctx context.Context, k verify.CacheKey, e verify.Entry) error {
	r := e.Result
	return c.Store.SaveVerificationResult(ctx, history.VerificationResult{
		Repository: k.Repository, Digest: k.Digest, Profile: k.Profile,
		Outcome: string(r.Outcome), Final: verify.Final(r),
		Signer: r.Signer, Reason: string(r.Reason), Detail: r.Detail,
		CheckedAt: e.CheckedAt,
	})
}
