package main

import (
	"strings"
	"testing"
)

func TestDecideGCPercent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		flag    int
		gogc    string
		limited bool
		percent int
		fromEnv bool
		warning string // a part of the warning; "" for none
	}{
		{name: "flag only", flag: 50, percent: 50},
		{name: "flag only, with a limit", flag: 200, limited: true, percent: 200},
		{name: "GOGC number wins", flag: 50, gogc: "150", percent: 150, fromEnv: true},
		{name: "GOGC number outside the flag's range wins", flag: 50, gogc: "5", percent: 5, fromEnv: true},
		{name: "GOGC off with a limit", flag: 50, gogc: "off", limited: true, percent: -1, fromEnv: true},
		{name: "GOGC off without a limit", flag: 50, gogc: "off", percent: -1, fromEnv: true, warning: "grows without bound"},
		{name: "negative GOGC is off", flag: 50, gogc: "-1", percent: -1, fromEnv: true, warning: "grows without bound"},
		{name: "invalid GOGC", flag: 50, gogc: "fifty", percent: 50, warning: `GOGC="fifty" is not understood`},
		{name: "invalid GOGC with a limit", flag: 80, gogc: "50%", limited: true, percent: 80, warning: "--gc-percent=80 applies"},
		{name: "GOGC OFF is not off", flag: 50, gogc: "OFF", percent: 50, warning: "not understood"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := decideGCPercent(tc.flag, tc.gogc, tc.limited)
			if got.percent != tc.percent || got.fromEnv != tc.fromEnv {
				t.Errorf("decideGCPercent(%d, %q, %v) = percent %d, from GOGC %v; want %d, %v",
					tc.flag, tc.gogc, tc.limited, got.percent, got.fromEnv, tc.percent, tc.fromEnv)
			}
			switch {
			case tc.warning == "" && got.warning != "":
				t.Errorf("unexpected warning: %s", got.warning)
			case !strings.Contains(got.warning, tc.warning):
				t.Errorf("warning %q does not say %q", got.warning, tc.warning)
			}
		})
	}
}

func TestValidateGCPercent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		percent int
		ok      bool
	}{{10, true}, {50, true}, {1000, true}, {9, false}, {0, false}, {-1, false}, {1001, false}} {
		err := validateGCPercent(tc.percent)
		if tc.ok && err != nil {
			t.Errorf("validateGCPercent(%d): %v", tc.percent, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "between 10 and 1000")) {
			t.Errorf("validateGCPercent(%d) = %v, want an error naming the range 10 to 1000", tc.percent, err)
		}
	}
}
