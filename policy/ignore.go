package policy

// FluxIgnore is the value of Flux v1's ignore annotation on an object
// (fluxcd.io/ignore, or flux.weave.works/ignore), and the annotation that
// set it; "" when it has none. Flux v1 leaves an object whose ignore is
// "true", in git or in the cluster, out of its sync and out of garbage
// collection; with "sync_only" it syncs it but never collects it.
func FluxIgnore(annotations map[string]string) (value, key string) {
	for _, p := range []string{FluxPrefix, FluxLegacyPrefix} {
		if v, ok := annotations[p+"ignore"]; ok && (v == "true" || v == "sync_only") {
			return v, p + "ignore"
		}
	}
	return "", ""
}
