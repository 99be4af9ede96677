package policy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/fluxd/fluxd/helmrelease"
)

// Dialect names, as Dialects reports them.
const (
	DialectFluxd      = "fluxd"
	DialectFluxV1     = "flux-v1"
	DialectFluxLegacy = "flux-v1 (flux.weave.works)"
	DialectKeel       = "keel"
	DialectKeelLabel  = "keel (labels)"
)

// KeelPrefix is the prefix of Keel's annotations and labels.
const KeelPrefix = "keel.sh/"

// Dialects lists the policy dialects a workload's annotations (and
// Keel's labels) are written in, in the order Read gives them precedence.
func Dialects(annotations, labels map[string]string) []string {
	has := func(m map[string]string, prefix string) bool {
		for k := range m {
			if strings.HasPrefix(k, prefix) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, d := range []struct {
		name string
		in   bool
	}{
		{DialectFluxd, has(annotations, "fluxd.io/")},
		{DialectFluxV1, has(annotations, FluxPrefix) || has(annotations, FluxFilterPrefix)},
		{DialectFluxLegacy, has(annotations, FluxLegacyPrefix)},
		{DialectKeel, has(annotations, KeelPrefix)},
		{DialectKeelLabel, labels[KeelPolicy] != ""},
	} {
		if d.in {
			out = append(out, d.name)
		}
	}
	return out
}

// Unread says, for an annotation key in one of the dialects Read knows,
// why fluxd does not honour it, or "" when it does (or the key is of no
// dialect fluxd reads: other tools' annotations are none of its business).
func Unread(key string) string {
	if name, ok := strings.CutPrefix(key, "fluxd.io/"); ok {
		switch {
		case ownPolicyKey(key), key == AutomatedBy, key == LockedAt, key == TagOrder, key == Verify,
			strings.HasPrefix(key, VerifyPrefix) && len(key) > len(VerifyPrefix):
			return ""
		case strings.HasPrefix(key, TagPrefix), strings.HasPrefix(key, PinDigestPrefix), key == VerifyPrefix:
			return key + " names no container: write the container's name after the dot"
		}
		return "fluxd.io/" + name + " is not one of fluxd's annotations (a typo?); see docs/migrate.md for the ones it reads"
	}
	for _, p := range []string{FluxPrefix, FluxLegacyPrefix} {
		name, ok := strings.CutPrefix(key, p)
		if !ok {
			continue
		}
		switch {
		case name == "automated", name == "locked", name == "locked_msg", name == "locked_user", name == "ignore",
			strings.HasPrefix(name, "tag.") && len(name) > len("tag."):
			return ""
		case name == "tag.":
			return key + " names no container: write the container's name after the dot"
		case name == "sync-checksum", name == "sync-gc-mark":
			return "" // written by Flux v1 itself in the cluster, harmless in git
		}
		return "Flux v1's " + key + " is not read by fluxd (it reads automated, locked, locked_msg, locked_user, ignore and tag.CONTAINER; see docs/migrate.md)"
	}
	if c, ok := strings.CutPrefix(key, FluxFilterPrefix); ok {
		if c == "" {
			return key + " names no container: write the container's name after the slash"
		}
		return ""
	}
	if name, ok := strings.CutPrefix(key, KeelPrefix); ok {
		switch name {
		case "policy", "match-tag":
			return ""
		case "trigger":
			return "Keel's keel.sh/trigger is not needed: fluxd polls the registries its services use and takes notifications (webhooks, fluxctl notify) whatever it says"
		case "pollSchedule":
			return "Keel's keel.sh/pollSchedule is not read: fluxd's own registry poll interval applies"
		case "approvals", "approvalDeadline":
			return "Keel's approvals (" + key + ") are not built in fluxd: nothing waits for them; lock the workload (fluxctl lock) and release it by hand instead"
		}
		return "Keel's " + key + " is not read by fluxd"
	}
	return ""
}

// Object is what Unhonoured needs to know of the object annotated.
type Object struct {
	// HelmRelease says it is a HelmRelease, whose spec.values Flux v1's
	// repository.fluxcd.io/, tag.fluxcd.io/ and registry.fluxcd.io/
	// annotations map (they mean nothing on another kind).
	HelmRelease bool
	// Containers are the names of its containers as fluxd reads them (a
	// HelmRelease's images included), for the annotations that name one.
	Containers []string
}

// Unhonoured says, sorted, why fluxd does not honour each annotation of
// obj's, as written (raw), that one of the dialects Read knows defines but
// that does nothing there: one fluxd does not read (Unread), a tag filter
// or pin naming no container obj has, Flux v1's HelmRelease mappings on
// another kind or without the repository mapping they need. Nothing a
// dialect defines is ignored without a word.
func Unhonoured(raw map[string]string, obj Object) []string {
	var out []string
	for k := range raw {
		if why := Unread(k); why != "" {
			out = append(out, why)
			continue
		}
		if c, ok := container(k); ok && !slices.Contains(obj.Containers, c) {
			has := "its containers are " + strings.Join(obj.Containers, ", ")
			if len(obj.Containers) == 0 {
				has = "fluxd finds no container in it"
			}
			out = append(out, fmt.Sprintf("%s names the container %q, which this object does not have (%s), so it does nothing; a typo?", k, c, has))
		}
		for _, p := range []string{helmrelease.RepositoryPrefix, helmrelease.TagPrefix, helmrelease.RegistryPrefix} {
			name, ok := strings.CutPrefix(k, p)
			if !ok {
				continue
			}
			switch {
			case !obj.HelmRelease:
				out = append(out, fmt.Sprintf("Flux v1's %s maps an image in a HelmRelease's values; on this kind it does nothing (nor did it in Flux v1)", k))
			case name == "":
				out = append(out, k+" names no image: write the image's name after the slash")
			case p != helmrelease.RepositoryPrefix && raw[helmrelease.RepositoryPrefix+name] == "":
				out = append(out, fmt.Sprintf("%s does nothing without %s%s, the path of the image's repository (as in Flux v1)", k, helmrelease.RepositoryPrefix, name))
			}
		}
	}
	sort.Strings(out)
	return out
}

// container is the container an annotation's key names, in any dialect
// Read knows: fluxd's tag filter, pin and verification profile, Flux v1's
// tag filter in either form.
func container(key string) (string, bool) {
	for _, p := range []string{TagPrefix, PinDigestPrefix, VerifyPrefix, FluxPrefix + "tag.", FluxLegacyPrefix + "tag.", FluxFilterPrefix} {
		if c, ok := strings.CutPrefix(key, p); ok && c != "" {
			return c, true
		}
	}
	return "", false
}
