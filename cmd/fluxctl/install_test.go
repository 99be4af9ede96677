package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fluxd/fluxd/deploy"
)

// install renders no image nobody published: --image is required, and the
// other options are still checked first.
func TestInstallNeedsAnImage(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := runInstall(&out, deploy.Options{GitURL: "https://git.example/r.git"})
	if err == nil || !strings.Contains(err.Error(), "--image is required") || out.Len() != 0 {
		t.Errorf("install without --image: %v, printed %d bytes; want a refusal and nothing printed", err, out.Len())
	}
	if err := runInstall(&out, deploy.Options{GitURL: "https://git.example/r.git", Replicas: 2}); err == nil || !strings.Contains(err.Error(), "--history-db-secret") {
		t.Errorf("install --replicas 2 without a database or an image: %v; want the database named first", err)
	}
	if err := runInstall(&out, deploy.Options{GitURL: "https://git.example/r.git", Image: "reg.example/fluxd:v1"}); err != nil || !strings.Contains(out.String(), "image: reg.example/fluxd:v1") {
		t.Errorf("install with --image: %v\n%s", err, out.String())
	}
}
