package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/registry"
	"github.com/fluxd/fluxd/release"
)

// Page is the part of each container's images a caller shows: Limit
// images from Offset (Limit 0: all). Creation times are read first for
// the images on the page and the running one; the rest are read in the
// background.
type Page struct {
	Offset, Limit int
}

// defaultPage is what a caller that names no page sees first (fluxctl's
// default --limit).
var defaultPage = Page{Limit: 10}

// pagedImages is the side of the image lister that lets list-images
// answer a big repository at once: the tag list alone, what the cache
// knows, and the metadata of a few tags (registry/oci's Client).
type pagedImages interface {
	Tags(ctx context.Context, repository string) ([]string, error)
	ImagesMatching(ctx context.Context, repository string, keep func(tag string) bool) ([]registry.Image, error)
	cachedImages
}

// maxPageRead is how many images of a page are read before list-images
// answers; a bigger page is answered with what is known, its other
// images shown as being read by the background refresh.
const maxPageRead = 50

// coldTags is how many tags without metadata make a repository "cold":
// list-images then answers once the page's images are read rather than
// wait for the whole refresh, which takes at least 2 requests per tag.
const coldTags = 64

// repoImages is one repository as list-images sees it: its tags, and
// what is known of each (a zero CreatedAt and no Digest: not read yet).
type repoImages struct {
	tags  []string
	known map[string]registry.Image
	st    registry.RefreshStatus
	err   error
	// cold says the repository has many tags not read yet: under
	// build-time order it is refreshed in the background after the page
	// is read.
	cold bool
	// byTime says a container shows it in build-time order, which needs
	// every tag read; later are the tags shown but not read before the
	// answer, read in the background when no full refresh is.
	byTime bool
	later  []string
}

// refresh refreshes a repository in the background, shared by concurrent
// callers, and returns where its result will be sent.
func (d *Daemon) refresh(ctx context.Context, repo string) <-chan singleflight.Result {
	return d.refreshes.DoChan(repo, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		return d.deps.Images.Images(rctx, repo)
	})
}

// listPaged is ListImages for a lister that can answer from the tag list:
// the order needs no request per tag unless it is by build time, the page
// shown is read first, the rest in the background.
func (d *Daemon) listPaged(ctx context.Context, svc Service, lister pagedImages, page Page) []ContainerImages {
	wait := d.cfg.ListWait
	if wait <= 0 {
		wait = 1500 * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	// Which repositories some container shows in build-time order: only
	// those are refreshed in full (every tag's manifest and config).
	byTime := map[string]bool{}
	for _, c := range svc.Containers {
		if ref, err := registry.ParseRef(c.Image); err == nil {
			f, ferr := containerFilter(svc.def, svc.annotations, c.Name, ref)
			byTime[ref.Repository] = byTime[ref.Repository] || ferr != nil || f.NeedsMetadata() || f.Order == ""
		}
	}
	byRepo := map[string]*repoImages{}
	var out []ContainerImages
	for _, c := range svc.Containers {
		ci := ContainerImages{Container: c.Name, Current: c.Image}
		ref, err := registry.ParseRef(c.Image)
		if err != nil {
			ci.Err = err
			out = append(out, ci)
			continue
		}
		ri, ok := byRepo[ref.Repository]
		if !ok {
			ri = d.repoImages(ctx, lister, ref.Repository, byTime[ref.Repository])
			byRepo[ref.Repository] = ri
		}
		if ri.err != nil {
			ci.Err = ri.err
			out = append(out, ci)
			continue
		}
		f, ferr := containerFilter(svc.def, svc.annotations, c.Name, ref)
		byTime := ferr != nil || f.NeedsMetadata() || f.Order == ""
		ri.byTime = ri.byTime || byTime
		rows := orderRows(ri, f)
		// The page and the running image are read now, if not known.
		var missing []string
		runningUnread := false
		for i, img := range rows {
			onPage := i >= page.Offset && (page.Limit <= 0 || i < page.Offset+page.Limit)
			if (onPage || img.Tag == ref.Tag) && img.Digest == "" {
				missing = append(missing, img.Tag)
				runningUnread = runningUnread || img.Tag == ref.Tag
			}
		}
		if len(missing) > maxPageRead {
			// A big page (limit 0 asks for all) is not read before the
			// answer: its reads would duplicate the background refresh,
			// which every caller shares. Only the running image is read.
			if !byTime {
				ri.later = append(ri.later, missing...)
			}
			missing = missing[:0]
			if runningUnread {
				missing = append(missing, ref.Tag)
			}
			ri.cold = true
		}
		if len(missing) > 0 {
			d.readTags(ctx, lister, ref.Repository, ri, missing, deadline)
			rows = orderRows(ri, f)
		}
		ci.Available = rows
		ci.Refresh = ri.st
		ci.Read = len(ri.known)
		if byTime && ci.Read < len(ri.tags) {
			ci.Refresh.Refreshing = true
		}
		if !byTime {
			// Under an order from the tag list only the images shown
			// are read: the view is being read while one of them is not.
			for i, img := range rows {
				onPage := i >= page.Offset && (page.Limit <= 0 || i < page.Offset+page.Limit)
				if (onPage || img.Tag == ref.Tag) && img.Digest == "" {
					ci.Refresh.Refreshing = true
					break
				}
			}
		}
		if ferr != nil {
			ci.Filter = "invalid"
			ci.Warnings = append(ci.Warnings, "invalid policy: "+ferr.Error())
		} else {
			rankPassing(&ci, f, ref)
		}
		out = append(out, ci)
	}
	for repo, ri := range byRepo {
		switch {
		case ri.cold && ri.byTime:
			d.refresh(ctx, repo)
		case len(ri.later) > 0:
			// Under semver, alphabetical or numerical order only the
			// images shown are read, not every tag's manifest and
			// config; one such read per repository at a time.
			d.readLater(ctx, lister, repo, ri.later)
		}
	}
	return out
}

// repoImages reads a repository's tag list and what the cache knows of
// it, starts a refresh in the background, and waits for it only while it
// is quick: a repository with many tags not yet read is answered without.
func (d *Daemon) repoImages(ctx context.Context, lister pagedImages, repo string, byTime bool) *repoImages {
	ri := &repoImages{known: map[string]registry.Image{}}
	ri.tags, ri.err = lister.Tags(ctx, repo)
	if ri.err != nil {
		// The cache may still know the repository: answer from it, saying
		// why it may be stale.
		cached, err := lister.Cached(ctx, repo)
		if err != nil || len(cached) == 0 {
			return ri
		}
		ri.st = lister.Status(repo)
		ri.st.LastError, ri.err = firstLine(ri.err), nil
		for _, img := range cached {
			ri.tags = append(ri.tags, img.Tag)
			ri.known[img.Tag] = img
		}
		return ri
	}
	cached, _ := lister.Cached(ctx, repo)
	listed := make(map[string]bool, len(ri.tags))
	for _, t := range ri.tags {
		listed[t] = true
	}
	for _, img := range cached {
		if listed[img.Tag] {
			ri.known[img.Tag] = img
		}
	}
	if !byTime {
		// Ordered from the tag list: only the images shown are read
		// (see listPaged), never every tag.
		ri.cold = len(ri.tags)-len(ri.known) > coldTags
		ri.st = lister.Status(repo)
		return ri
	}
	if len(ri.tags)-len(ri.known) > coldTags {
		// Cold: the page is read first, then the rest (see listPaged), so
		// that the page's requests do not queue behind the refresh's at
		// the rate limit.
		ri.cold = true
		ri.st = lister.Status(repo)
		return ri
	}
	ch := d.refresh(ctx, repo)
	wait := d.cfg.ListWait
	if wait <= 0 {
		wait = 1500 * time.Millisecond
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.Err != nil {
			ri.st = lister.Status(repo)
			ri.st.LastError = firstLine(r.Err)
			return ri
		}
		ri.tags = ri.tags[:0]
		clear(ri.known)
		for _, img := range r.Val.([]registry.Image) {
			ri.tags = append(ri.tags, img.Tag)
			ri.known[img.Tag] = img
		}
	case <-timer.C:
		ri.st = lister.Status(repo)
		ri.st.Refreshing = true
	case <-ctx.Done():
	}
	return ri
}

// readTags reads the images of tags now, until the deadline; what is not
// read by then is read on in the background and shown as not read yet.
func (d *Daemon) readTags(ctx context.Context, lister pagedImages, repo string, ri *repoImages, tags []string, deadline time.Time) {
	want := make(map[string]bool, len(tags))
	for _, t := range tags {
		want[t] = true
	}
	// Callers showing the same page share one read, which goes on after
	// the deadline (it fills the cache for the next call).
	key := repo + "\x00" + strings.Join(slices.Sorted(maps.Keys(want)), "\x00")
	done := d.pageReads.DoChan(key, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		imgs, _ := lister.ImagesMatching(rctx, repo, func(t string) bool { return want[t] })
		return imgs, nil
	})
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case r := <-done:
		imgs, _ := r.Val.([]registry.Image)
		for _, img := range imgs {
			ri.known[img.Tag] = img
		}
	case <-timer.C:
	case <-ctx.Done():
	}
}

// readLater reads tags' images in the background, one read per
// repository at a time: a caller while one runs adds nothing, and reads
// what is still missing on a later call.
func (d *Daemon) readLater(ctx context.Context, lister pagedImages, repo string, tags []string) {
	want := make(map[string]bool, len(tags))
	for _, t := range tags {
		want[t] = true
	}
	d.pageReads.DoChan(repo+"\x00later", func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
		defer cancel()
		return lister.ImagesMatching(rctx, repo, func(t string) bool { return want[t] })
	})
}

// containerFilter is the container's policy bound to its running tag: a
// Flux v2 ImagePolicy's on its service, the annotations' otherwise.
func containerFilter(def *gitrepo.Definition, ann map[string]string, container string, ref registry.Ref) (registry.Filter, error) {
	f, err := release.ContainerFilter(ann, container)
	if def != nil && def.Format == gitrepo.FormatSetters {
		f, err = release.DefinitionFilter(def, container)
	}
	if err == nil {
		f, err = f.Bind(ref.Tag)
	}
	return f, err
}

// orderRows orders a repository's tags for list-images. Under an order
// that needs no metadata (semver, alphabetical, numerical) the tags the
// filter passes come first, best first, from the tag list alone; the
// others follow, newest first as far as known. Under build time (or an
// invalid policy) it is newest first of what is known, then the tags not
// read yet and the undated, by name.
func orderRows(ri *repoImages, f registry.Filter) []registry.Image {
	rows := make([]registry.Image, 0, len(ri.tags))
	byTime := f.NeedsMetadata() || f.Order == ""
	var passing []string
	for _, t := range ri.tags {
		if !byTime && f.Match(t) {
			passing = append(passing, t)
			continue
		}
		img, ok := ri.known[t]
		if !ok {
			img = registry.Image{Tag: t}
		}
		rows = append(rows, img)
	}
	registry.SortNewestFirst(rows)
	if byTime {
		return rows
	}
	f.Rank(passing)
	first := make([]registry.Image, 0, len(ri.tags))
	for _, t := range passing {
		img, ok := ri.known[t]
		if !ok {
			img = registry.Image{Tag: t}
		}
		first = append(first, img)
	}
	return append(first, rows...)
}

// rankPassing fills in what the container's filter passes, best first,
// the best, and warnings (see applyPolicy). Available is already in the
// filter's order. Under build time the best is only known once every
// passing tag is read; images not read yet are not counted as undated.
func rankPassing(ci *ContainerImages, f registry.Filter, ref registry.Ref) {
	ci.Filter = f.String()
	undated, unread := 0, 0
	for _, img := range ci.Available {
		if !f.Match(img.Tag) {
			continue
		}
		ci.Passing = append(ci.Passing, img.Tag)
		switch {
		case img.Digest == "":
			unread++
		case !img.Dated():
			undated++
		}
	}
	if len(ci.Passing) == 0 {
		if f.Kind != "" {
			ci.Warnings = append(ci.Warnings, fmt.Sprintf("tag filter %s matches none of the %d tags of %s", f, len(ci.Available), ref.Repository))
		}
		return
	}
	ci.Best = ci.Passing[0]
	if !f.NeedsMetadata() {
		return
	}
	switch {
	case unread > 0:
		ci.Best = ""
		ci.Warnings = append(ci.Warnings, fmt.Sprintf("%d of the images passing %s are still being read; the order by build time, and the newest, are known once they are", unread, f))
	case undated == len(ci.Passing):
		ci.Warnings = append(ci.Warnings, fmt.Sprintf("no image passing %s has a creation time, so the newest build cannot be told; use a semver filter or --tag-order", f))
		ci.Best = ""
	case undated > 0:
		ci.Warnings = append(ci.Warnings, fmt.Sprintf("%d of the images passing %s have no creation time; they sort last and are never picked by build time", undated, f))
	}
}
