package main

import (
	"bytes"
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
