package main

import (
	"testing"
)

// --git-ssh-key-secret names a Secret in the pod's namespace, or in the
// namespace it gives.
func TestSecretName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ flag, ns, wantNS, wantName string }{
		{"fluxd-ssh", "fluxd", "fluxd", "fluxd-ssh"},
		{"gitops/deploy-key", "fluxd", "gitops", "deploy-key"},
	} {
		ns, name := secretName(tc.flag, tc.ns)
		if ns != tc.wantNS || name != tc.wantName {
			t.Errorf("secretName(%q, %q) = %s/%s, want %s/%s", tc.flag, tc.ns, ns, name, tc.wantNS, tc.wantName)
		}
	}
}
