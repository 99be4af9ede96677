package store

import (
	"context"

	"github.com/fluxd/fluxd/history"
)

// Connecting's history.Promotions: each call fails with ErrNotConnected
// until the database is connected.

func (c *Connecting) SavePromotionBundle(ctx context.Context, b history.PromotionBundle) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.SavePromotionBundle(ctx, b)
}

func (c *Connecting) PromotionBundles(ctx context.Context, pipeline string) ([]history.PromotionBundle, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.PromotionBundles(ctx, pipeline)
}

func (c *Connecting) PutPromotionRecord(ctx context.Context, r history.PromotionRecord) (history.PromotionRecord, error) {
	s, err := c.store()
	if err != nil {
		return history.PromotionRecord{}, err
	}
	return s.PutPromotionRecord(ctx, r)
}

func (c *Connecting) PromotionRecords(ctx context.Context, pipeline string) ([]history.PromotionRecord, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.PromotionRecords(ctx, pipeline)
}

func (c *Connecting) SetPromotionPause(ctx context.Context, p history.PromotionPause) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.SetPromotionPause(ctx, p)
}

func (c *Connecting) DeletePromotionPause(ctx context.Context, pipeline, stage string) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.DeletePromotionPause(ctx, pipeline, stage)
}

func (c *Connecting) PromotionPauses(ctx context.Context, pipeline string) ([]history.PromotionPause, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.PromotionPauses(ctx, pipeline)
}

func (c *Connecting) PromotionPipelines(ctx context.Context) ([]string, error) {
	s, err := c.store()
	if err != nil {
		return nil, err
	}
	return s.PromotionPipelines(ctx)
}

// The verification results, passed on likewise.

func (c *Connecting) VerificationResult(ctx context.Context, repository, digest, profile string) (history.VerificationResult, error) {
	s, err := c.store()
	if err != nil {
		return history.VerificationResult{}, err
	}
	return s.VerificationResult(ctx, repository, digest, profile)
}

func (c *Connecting) SaveVerificationResult(ctx context.Context, r history.VerificationResult) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.SaveVerificationResult(ctx, r)
}

func (c *Connecting) EachVerificationResult(ctx context.Context, fn func(history.VerificationResult) error) error {
	s, err := c.store()
	if err != nil {
		return err
	}
	return s.EachVerificationResult(ctx, fn)
}
