package gogit

import (
	"strings"
	"testing"
)

// A plaintext remote (http://, git://) on another host is refused unless
// allowed; a loopback one is accepted; credentials in clear are always
// warned about, and never shown.
func TestPlaintextRemotes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url        string
		allow      bool
		refused    bool
		warnedWith string // "" no warning
	}{
		{"http://git.example/team/manifests.git", false, true, "plaintext"},
		{"git://git.example/team/manifests.git", false, true, "plaintext"},
		{"http://git.example/team/manifests.git", true, false, "plaintext"},
		{"http://user:hunter2@git.example/r.git", true, false, "credentials are sent in plaintext"},
		{"http://user:hunter2@127.0.0.1:8080/r.git", false, false, "credentials are sent in plaintext"},
		{"http://127.0.0.1:8080/r.git", false, false, ""},
		{"http://localhost/r.git", false, false, ""},
		{"http://[::1]:9418/r.git", false, false, ""},
		{"https://user:hunter2@git.example/r.git", false, false, ""},
		{"file:///srv/git/r.git", false, false, ""},
		{"ssh://git@git.example/r.git", false, false, ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			err := checkPlaintext(tc.url, tc.allow)
			if (err != nil) != tc.refused {
				t.Fatalf("checkPlaintext(allow=%v) = %v, refused want %v", tc.allow, err, tc.refused)
			}
			if err != nil && (!strings.Contains(err.Error(), "--git-allow-insecure") || strings.Contains(err.Error(), "hunter2")) {
				t.Fatalf("the refusal does not say how to allow it, or shows a password: %v", err)
			}
			w := PlaintextWarning(tc.url)
			if (w == "") != (tc.warnedWith == "") || !strings.Contains(w, tc.warnedWith) || strings.Contains(w, "hunter2") {
				t.Fatalf("warning %q, want one with %q", w, tc.warnedWith)
			}
		})
	}
	// Validate reports it among the configuration's problems.
	cfg := Config{URL: "http://git.example/r.git", Branch: "main", User: "fluxd", Email: "f@example.com", Dir: t.TempDir()}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "plaintext") {
		t.Fatalf("Validate of a plaintext remote: %v", err)
	}
	cfg.AllowInsecure = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with AllowInsecure: %v", err)
	}
}
