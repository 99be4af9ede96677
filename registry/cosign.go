package registry

import "strings"

// CosignArtifact reports whether tag is one that cosign writes beside an
// image rather than a release of it: sha256-<64 hex>.sig (a signature),
// .att (an attestation), .sbom (an attached SBOM), or sha256-<64 hex>
// alone, the tag the OCI 1.1 referrers fallback keeps the index of an
// image's referrers under. These tags point at signature and attestation
// manifests, never at something to run, so no filter passes them: a
// glob * or regex .* in a repository that cosign signs would otherwise
// "release" a signature. Flux v2's image automation leaves ^.*\.sig$ out
// by default for the same reason.
func CosignArtifact(tag string) bool {
	rest, ok := strings.CutPrefix(tag, "sha256-")
	if !ok || len(rest) < 64 {
		return false
	}
	hex, suffix := rest[:64], rest[64:]
	for i := 0; i < len(hex); i++ {
		c := hex[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	switch suffix {
	case "", ".sig", ".att", ".sbom":
		return true
	}
	return false
}
