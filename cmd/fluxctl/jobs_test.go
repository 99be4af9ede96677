package main

import "testing"

func TestCancelledErrorSaysItOnce(t *testing.T) {
	t.Parallel()
	for why, want := range map[string]string{
		"cancelled while queued":                  "job j1 was cancelled while queued",
		"cancelled: cancelled by a user":          "job j1 was cancelled by a user",
		"cancelled: stopped before its push: x y": "job j1 was cancelled: stopped before its push: x y",
	} {
		if got := cancelledError("j1", why).Error(); got != want {
			t.Errorf("%q: %q; want %q", why, got, want)
		}
	}
}
