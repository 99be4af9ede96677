package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fluxctl check reads a checkout with no daemon: the repository of
// check/testdata/peers carries each peer's annotations.
func TestCheckOutput(t *testing.T) {
	for _, o := range []string{"table", "json"} {
		t.Run(o, func(t *testing.T) {
			var buf bytes.Buffer
			if err := runCheck(&buf, "../../check/testdata/peers", nil, o); err != nil {
				t.Fatal(err)
			}
			golden(t, "check-peers."+o, buf.Bytes())
		})
	}
}

func TestCheckRefusesWhatIsNotACheckout(t *testing.T) {
	var buf bytes.Buffer
	err := runCheck(&buf, "no/such/dir", nil, "table")
	if err == nil || !strings.Contains(err.Error(), "is not a directory") || buf.Len() > 0 {
		t.Errorf("check of a missing directory: %v, printed %q", err, buf.String())
	}
	err = runCheck(&buf, "../../check/testdata/peers", []string{"../elsewhere"}, "table")
	if err == nil || !strings.Contains(err.Error(), "leads outside the repository") || buf.Len() > 0 {
		t.Errorf("check of a path outside the checkout: %v, printed %q", err, buf.String())
	}
}

// A file fluxd cannot read is reported and makes check exit non-zero, in
// every output format, after the whole report is printed; warnings do not
// (the peers' checkout above has warnings and exits 0).
func TestCheckFailsOnFilesItCannotRead(t *testing.T) {
	dir := t.TempDir()
	good := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app, namespace: default}\nspec:\n  template:\n    spec:\n      containers: [{name: app, image: 'reg.example/app:1.0.0'}]\n"
	if err := os.WriteFile(filepath.Join(dir, "app.yaml"), []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("kind: Deployment\nmetadata: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"table", "json"} {
		var buf bytes.Buffer
		err := runCheck(&buf, dir, nil, o)
		if err == nil || !strings.Contains(err.Error(), "could not be read") {
			t.Errorf("%s: check of a checkout with a malformed file: err %v", o, err)
		}
		if !strings.Contains(buf.String(), "default:deployment/app") || !strings.Contains(buf.String(), "broken.yaml") {
			t.Errorf("%s: the report is not printed whole before the error:\n%s", o, buf.String())
		}
	}
	if err := os.Remove(filepath.Join(dir, "broken.yaml")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := runCheck(&buf, dir, nil, "table"); err != nil {
		t.Errorf("check of a clean checkout: %v\n%s", err, buf.String())
	}
}
