package oci

import (
	"fmt"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fluxd/fluxd/registry"
)

// metaSet is what is known of images, by manifest digest; safe for
// concurrent use.
type metaSet struct {
	mu sync.Mutex
	m  map[string]registry.ImageMeta
}

func newMetaSet() *metaSet { return &metaSet{m: map[string]registry.ImageMeta{}} }

func (s *metaSet) get(digest string) (registry.ImageMeta, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.m[digest]
	return m, ok
}

func (s *metaSet) put(digest string, m registry.ImageMeta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[digest] = m
}

// recentMetas keeps the images put lately, at most about 2×size: when
// the current generation is full it becomes the previous one, and the
// previous is dropped. Hand-rolled rather than an LRU library: it needs
// no order per entry, only a bound, and two maps give that.
type recentMetas struct {
	mu        sync.Mutex
	size      int
	cur, prev map[string]registry.ImageMeta
}

func newRecentMetas(size int) *recentMetas {
	return &recentMetas{size: size, cur: map[string]registry.ImageMeta{}}
}

func (r *recentMetas) get(digest string) (registry.ImageMeta, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.cur[digest]; ok {
		return m, true
	}
	m, ok := r.prev[digest]
	return m, ok
}

func (r *recentMetas) put(digest string, m registry.ImageMeta) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.cur) >= r.size {
		r.prev, r.cur = r.cur, map[string]registry.ImageMeta{}
	}
	r.cur[digest] = m
}

// meta reads an image's config (for an index, the configured platform's
// image): its digest, creation time, labels and platform.
func (c *Client) meta(desc *remote.Descriptor) (registry.ImageMeta, error) {
	var img v1.Image
	var err error
	if desc.MediaType.IsIndex() {
		idx, err := desc.ImageIndex()
		if err != nil {
			return registry.ImageMeta{}, err
		}
		if img, err = platformImage(idx, c.platform); err != nil {
			return registry.ImageMeta{}, err
		}
	} else if img, err = desc.Image(); err != nil {
		return registry.ImageMeta{}, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return registry.ImageMeta{}, err
	}
	m := registry.ImageMeta{CreatedAt: cfg.Created.Time, Labels: cfg.Config.Labels}
	if d, err := img.ConfigName(); err == nil {
		m.ConfigDigest = d.String()
	}
	if cfg.OS != "" {
		p := v1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant}
		m.Platform = p.String()
	}
	if s := cfg.Config.Labels[CreatedLabel]; s != "" {
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			m.CreatedAt = t
		}
	}
	return m, nil
}

func platformImage(idx v1.ImageIndex, want v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.Satisfies(want) {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for platform %s in the index", want)
}
