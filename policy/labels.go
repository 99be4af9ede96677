package policy

import "strings"

// ReadObject is Read for a workload with its labels: Keel reads
// keel.sh/policy, and keel.sh/match-tag with it, from the labels when the
// annotations have no policy (keel-hq/keel internal/policy,
// GetPolicyFromLabelsOrAnnotations: annotations first, then labels). The
// labels' keys do not appear in the result, which holds annotations only;
// warnings about them say they are labels.
func ReadObject(annotations, labels map[string]string) (map[string]string, []string) {
	if _, ok := annotations[KeelPolicy]; ok || labels[KeelPolicy] == "" {
		return Read(annotations)
	}
	in := make(map[string]string, len(annotations)+2)
	for k, v := range annotations {
		in[k] = v
	}
	in[KeelPolicy] = labels[KeelPolicy]
	delete(in, KeelMatchTag)
	if v, ok := labels[KeelMatchTag]; ok {
		in[KeelMatchTag] = v
	}
	out, warnings := Read(in)
	delete(out, KeelPolicy)
	delete(out, KeelMatchTag)
	if v, ok := annotations[KeelMatchTag]; ok {
		out[KeelMatchTag] = v
	}
	for i, w := range warnings {
		w = strings.ReplaceAll(w, KeelPolicy+":", KeelPolicy+" (a label):")
		warnings[i] = strings.ReplaceAll(w, KeelMatchTag+":", KeelMatchTag+" (a label):")
	}
	return out, warnings
}
