package daemon

import (
	"github.com/fluxd/fluxd/policy"
	"github.com/fluxd/fluxd/registry"
)

// pinnedMutable says whether container runs ref pinned by digest on a
// tag that moves ("latest", a branch): a notification of its repository
// must then re-check that tag's digest (one manifest HEAD), which the
// full refresh does for every known mutable tag, where the tag list
// alone would not see a new push of the same tag.
func pinnedMutable(annotations map[string]string, container string, ref registry.Ref) bool {
	return ref.Tag != "" && policy.Pinned(annotations, container) && !registry.Immutable(ref.Tag)
}
