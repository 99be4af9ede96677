package main

import (
	"testing"
	"time"
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

// The clone's retry cap is at least its first wait.
func TestValidateRetryMax(t *testing.T) {
	t.Parallel()
	if err := validateRetryMax(time.Minute); err != nil {
		t.Errorf("1m: %v", err)
	}
	if err := validateRetryMax(100 * time.Millisecond); err == nil {
		t.Error("100ms is accepted; want it refused as under the first wait of 1s")
	}
}
