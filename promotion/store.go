package promotion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/fluxd/fluxd/history"
)

// NewStore is the Store over the history store's promotion tables
// (history.Promotions): SQLite for one replica, PostgreSQL for replicas
// and for the fluxds of several clusters sharing one database. Rows are
// keyed by pipeline, not by fluxd instance, so every fluxd running a
// stage of a pipeline reads and writes the same bundles, records and
// pauses.
//
// A bundle's images and a record's state are kept as JSON in the shapes
// below (bundleData, recordData), whose field names are fixed by their
// tags: renaming a Go field does not change what is stored.
func NewStore(h history.Promotions) Store {
	return &store{h: h}
}

type store struct {
	h history.Promotions
}

// bundleData is a bundle as stored, less its keys (pipeline, ID) and
// Created, which are columns.
type bundleData struct {
	Stage  string      `json:"stage"`
	Images []imageData `json:"images"`
}

type imageData struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	Digest     string `json:"digest"`
}

// recordData is a record as stored, less its keys (pipeline, stage,
// bundle) and Version, which are columns.
type recordData struct {
	Created    time.Time `json:"created,omitzero"`
	Status     Status    `json:"status"`
	Reason     string    `json:"reason,omitempty"`
	Since      time.Time `json:"since,omitzero"`
	RolledOut  time.Time `json:"rolledOut,omitzero"`
	SoakUntil  time.Time `json:"soakUntil,omitzero"`
	Passed     []string  `json:"passed,omitempty"`
	Approvers  []string  `json:"approvers,omitempty"`
	PromotedBy string    `json:"promotedBy,omitempty"`
	Current    bool      `json:"current,omitempty"`
	Job        string    `json:"job,omitempty"`
	JobInst    string    `json:"jobInstance,omitempty"`
}

// SaveBundle stores b; a bundle already stored under its pipeline and
// ID is kept.
func (s *store) SaveBundle(ctx context.Context, b Bundle) error {
	d := bundleData{Stage: b.Stage, Images: make([]imageData, len(b.Images))}
	for i, img := range b.Images {
		d.Images[i] = imageData(img)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("storing bundle %s of pipeline %s: %w", b.ID, b.Pipeline, err)
	}
	return s.h.SavePromotionBundle(ctx, history.PromotionBundle{Pipeline: b.Pipeline, ID: b.ID, Created: b.Created, Data: data})
}

// Bundles returns the pipeline's bundles, oldest first.
func (s *store) Bundles(ctx context.Context, pipeline string) ([]Bundle, error) {
	rows, err := s.h.PromotionBundles(ctx, pipeline)
	if err != nil {
		return nil, err
	}
	out := make([]Bundle, 0, len(rows))
	for _, row := range rows {
		var d bundleData
		if err := json.Unmarshal(row.Data, &d); err != nil {
			return nil, fmt.Errorf("reading bundle %s of pipeline %s: the stored bundle is not the JSON fluxd writes (%w); was the database written by another program?", row.ID, pipeline, err)
		}
		b := Bundle{ID: row.ID, Pipeline: row.Pipeline, Stage: d.Stage, Created: row.Created, Images: make([]Image, len(d.Images))}
		for i, img := range d.Images {
			b.Images[i] = Image(img)
		}
		out = append(out, b)
	}
	return out, nil
}

// Records returns the pipeline's records, each with its Version, by
// stage then bundle.
func (s *store) Records(ctx context.Context, pipeline string) ([]Record, error) {
	rows, err := s.h.PromotionRecords(ctx, pipeline)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(rows))
	for _, row := range rows {
		r, err := fromRow(row)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// PutRecord writes r if the stored record is at r.Version, and returns it
// at its new version; else an error wrapping ErrConflict.
func (s *store) PutRecord(ctx context.Context, r Record) (Record, error) {
	data, err := json.Marshal(recordData{Created: r.Created, Status: r.Status, Reason: r.Reason, Since: r.Since,
		RolledOut: r.RolledOut, SoakUntil: r.SoakUntil, Passed: r.Passed, Approvers: r.Approvers,
		PromotedBy: r.PromotedBy, Current: r.Current, Job: r.Job, JobInst: r.JobInstance})
	if err != nil {
		return Record{}, fmt.Errorf("storing bundle %s in stage %s of pipeline %s: %w", r.Bundle, r.Stage, r.Pipeline, err)
	}
	row, err := s.h.PutPromotionRecord(ctx, history.PromotionRecord{Pipeline: r.Pipeline, Stage: r.Stage, Bundle: r.Bundle, Version: r.Version, Data: data})
	if errors.Is(err, history.ErrConflict) {
		return Record{}, fmt.Errorf("storing bundle %s in stage %s of pipeline %s at version %d: %w", r.Bundle, r.Stage, r.Pipeline, r.Version, ErrConflict)
	}
	if err != nil {
		return Record{}, err
	}
	r.Version = row.Version
	return r, nil
}

// Pauses returns the pipeline's paused stages, by stage name.
func (s *store) Pauses(ctx context.Context, pipeline string) (map[string]Pause, error) {
	rows, err := s.h.PromotionPauses(ctx, pipeline)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Pause, len(rows))
	for _, row := range rows {
		out[row.Stage] = Pause{By: row.By, Reason: row.Reason, Since: row.Since}
	}
	return out, nil
}

// SetPause pauses a stage, or with p nil resumes it.
func (s *store) SetPause(ctx context.Context, pipeline, stage string, p *Pause) error {
	if p == nil {
		return s.h.DeletePromotionPause(ctx, pipeline, stage)
	}
	return s.h.SetPromotionPause(ctx, history.PromotionPause{Pipeline: pipeline, Stage: stage, By: p.By, Reason: p.Reason, Since: p.Since})
}

func fromRow(row history.PromotionRecord) (Record, error) {
	var d recordData
	if err := json.Unmarshal(row.Data, &d); err != nil {
		return Record{}, fmt.Errorf("reading bundle %s in stage %s of pipeline %s: the stored record is not the JSON fluxd writes (%w); was the database written by another program?", row.Bundle, row.Stage, row.Pipeline, err)
	}
	return Record{Pipeline: row.Pipeline, Stage: row.Stage, Bundle: row.Bundle, Version: row.Version,
		Created: d.Created, Status: d.Status, Reason: d.Reason, Since: d.Since, RolledOut: d.RolledOut,
		SoakUntil: d.SoakUntil, Passed: d.Passed, Approvers: d.Approvers, PromotedBy: d.PromotedBy, Current: d.Current, Job: d.Job, JobInstance: d.JobInst}, nil
}
