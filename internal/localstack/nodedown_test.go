package localstack

import "testing"

func TestUnescapeMount(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`/tmp/a`:              "/tmp/a",
		`/tmp/with\040space`:  "/tmp/with space",
		`/tmp/tab\011and\134`: "/tmp/tab\tand\\",
		`/tmp/trailing\04`:    `/tmp/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
