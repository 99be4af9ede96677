package oci

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/fluxd/fluxd/internal/fluxerr"
	"github.com/fluxd/fluxd/registry"
)

// tagList is a repository's tag list as last read.
type tagList struct {
	tags []string
	// stable counts the reads in a row that found the same list; next is
	// when the list is read again.
	stable int
	next   time.Time
	// seq is the number of the read that found the list (see listSeq).
	seq uint64
}

// Tags lists a repository's tags, following pagination. Tags that break
// the OCI grammar are dropped (see registry.ValidTag). With ListMin set, a
// list read lately is answered without a request.
func (c *Client) Tags(ctx context.Context, repository string) ([]string, error) {
	return c.tags(ctx, repository, false)
}

// KeepsLists reports whether a list read lately is answered without a
// request (ListMin set).
func (c *Client) KeepsLists() bool { return c.cfg.ListMin > 0 }

// tags answers a fresh list from memory, or reads it (at once when
// force), shared by concurrent callers.
func (c *Client) tags(ctx context.Context, repository string, force bool) ([]string, error) {
	l, err := c.list(ctx, repository, force)
	if err != nil {
		return nil, err
	}
	return slices.Clone(l.tags), nil
}

// nextSeq numbers a list read as it starts; lastSeq is the last number
// given.
func (c *Client) nextSeq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.listSeq++
	return c.listSeq
}

func (c *Client) lastSeq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listSeq
}

// list is tags' list with the number of the read that found it; the
// returned list is shared and must not be changed.
func (c *Client) list(ctx context.Context, repository string, force bool) (*tagList, error) {
	if c.cfg.ListMin <= 0 {
		seq := c.nextSeq()
		tags, err := c.listTags(ctx, repository)
		if err != nil {
			return nil, err
		}
		return &tagList{tags: tags, seq: seq}, nil
	}
	now := c.cfg.Now()
	c.mu.Lock()
	l, ok := c.lists[repository]
	c.mu.Unlock()
	if ok && !force && now.Before(l.next) {
		c.lookupList("hit")
		return l, nil
	}
	if !ok && !force && c.cfg.Lists != nil {
		v, _, _ := c.listing.Do("stored\x00"+repository, func() (any, error) {
			return c.storedList(ctx, repository), nil
		})
		if sl := v.(*tagList); sl != nil {
			c.lookupList("stored")
			return sl, nil
		}
	}
	c.lookupList("read")
	key := repository
	if force {
		// A notification's read must start after the push it tells of:
		// joining a read already in flight (begun before the push) would
		// answer, and keep as fresh, the list without the pushed tag.
		// Forget lets this call start its own read; later ordinary
		// callers join this newer one.
		c.listing.Forget(key)
	}
	v, err, _ := c.listing.Do(key, func() (any, error) {
		seq := c.nextSeq()
		readAt := c.cfg.Now()
		tags, err := c.listTags(ctx, repository)
		if err != nil {
			return nil, err
		}
		slices.Sort(tags)
		nl := &tagList{tags: tags, seq: seq}
		c.mu.Lock()
		defer c.mu.Unlock()
		cur, had := c.lists[repository]
		if had && cur.seq > seq {
			// A read that began later ended first: its list is newer.
			return nl, nil
		}
		if had && slices.Equal(cur.tags, tags) {
			nl.stable = cur.stable + 1
		}
		nl.next = c.cfg.Now().Add(backoff(c.cfg.ListMin, c.cfg.ListMax, nl.stable))
		c.lists[repository] = nl
		if c.cfg.Lists != nil {
			c.saveList(repository, nl, readAt)
		}
		return nl, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*tagList), nil
}

func (c *Client) lookupList(result string) {
	if c.cfg.Metrics != nil {
		c.cfg.Metrics.lists.WithLabelValues(result).Inc()
	}
}

// listTags reads a repository's tag list from its registry.
func (c *Client) listTags(ctx context.Context, repository string) ([]string, error) {
	repo, err := name.NewRepository(repository, name.WeakValidation)
	if err != nil {
		return nil, fluxerr.New(fluxerr.User, fmt.Errorf("%q is not a valid image repository: %w", repository, err), "")
	}
	tags, err := c.pagedList(ctx, repo)
	if unauthorized(err) {
		// Credentials may have rotated, or come from a source whose
		// secret holds other credentials for this registry: read them
		// again and pass the refused source over, once.
		refused := c.chain.refuse(repo.Name())
		if c.refreshCredentials() || refused {
			c.renewPuller()
			tags, err = c.pagedList(ctx, repo)
		}
	}
	if err != nil {
		return nil, c.explain(repository, repo, err)
	}
	return c.validTags(ctx, repository, tags), nil
}

// pagedList reads a tag list page by page, within MaxTagPages pages and
// MaxTagListBytes bytes.
func (c *Client) pagedList(ctx context.Context, repo name.Repository) ([]string, error) {
	ctx = withListBudget(ctx, c.cfg.MaxTagListBytes)
	l, err := c.puller.Load().Lister(ctx, repo)
	if err != nil {
		return nil, err
	}
	var tags []string
	for pages := 0; l.HasNext(); pages++ {
		if pages == c.cfg.MaxTagPages {
			return nil, &pagesError{c.cfg.MaxTagPages}
		}
		page, err := l.Next(ctx)
		if err != nil {
			return nil, err
		}
		tags = append(tags, page.Tags...)
	}
	return tags, nil
}

// validTags drops the tags that break the OCI grammar, before anything
// reads, caches or writes them, and says so in the log.
func (c *Client) validTags(ctx context.Context, repository string, tags []string) []string {
	out := tags[:0]
	var bad []string
	for _, t := range tags {
		if registry.ValidTag(t) {
			out = append(out, t)
			continue
		}
		if len(bad) < 3 {
			if len(t) > 140 {
				t = t[:140] + "..."
			}
			bad = append(bad, strconv.Quote(t))
		}
	}
	if dropped := len(tags) - len(out); dropped > 0 {
		level := slog.LevelDebug
		if _, seen := c.warned.LoadOrStore(repository, true); !seen {
			level = slog.LevelWarn
		}
		c.cfg.Log.Log(ctx, level, "the registry lists tags that are not valid OCI tags; ignoring them",
			"component", "registry", "repository", repository, "dropped", dropped, "examples", strings.Join(bad, ", "))
	}
	return out
}

// Exists checks with one manifest HEAD that ref (repository:tag) is in its
// registry. Registries such as Docker Hub do not count a HEAD as a pull.
func (c *Client) Exists(ctx context.Context, ref string) (bool, error) {
	tag, err := name.NewTag(ref, name.WeakValidation)
	if err != nil {
		return false, fluxerr.New(fluxerr.User, registry.BadRef(ref, err), "")
	}
	if _, err := c.puller.Load().Head(ctx, tag); err != nil {
		var te *transport.Error
		if errors.As(err, &te) && te.StatusCode == http.StatusNotFound {
			return false, nil
		}
		return false, c.explain(tag.Context().String(), tag.Context(), err)
	}
	return true, nil
}

// RefreshTags reads a repository's tag list now (a notification), and
// nothing else: under version, alphabetical or numerical order the list
// is all a plan or a listing needs, and they read the tags they show.
func (c *Client) RefreshTags(ctx context.Context, repository string) ([]string, error) {
	return c.tags(ctx, repository, true)
}
