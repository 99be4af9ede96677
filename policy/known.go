package policy

import "strings"

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
		{DialectFluxV1, has(annotations, FluxPrefix)},
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
		case ownPolicyKey(key), key == AutomatedBy, key == LockedAt, key == TagOrder:
			return ""
		case strings.HasPrefix(key, TagPrefix), strings.HasPrefix(key, PinDigestPrefix):
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
		case name == "sync-checksum", name == "sync-gc-mark":
			return "" // written by Flux v1 itself in the cluster, harmless in git
		}
		return "Flux v1's " + key + " is not read by fluxd"
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
