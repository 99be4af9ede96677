package promotion

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fluxd/fluxd/platform"
)

func digest(c byte) string { return "sha256:" + strings.Repeat(string(c), 64) }

func TestBundleIsContentAddressed(t *testing.T) {
	a := Image{Repository: "reg/app", Tag: "1.2.0", Digest: digest('a')}
	s := Image{Repository: "reg/sidecar", Tag: "0.9", Digest: digest('b')}
	t0 := time.Unix(0, 0)
	b1, err := NewBundle("web", "dev", []Image{a, s}, t0)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := NewBundle("web", "dev", []Image{s, a, a}, t0.Add(time.Hour))
	if b1.ID != b2.ID || len(b1.ID) != IDLength {
		t.Errorf("the same images in another order, or twice, are the same bundle: %s %s", b1.ID, b2.ID)
	}
	retag := a
	retag.Tag = "1.2"
	b3, _ := NewBundle("web", "dev", []Image{retag, s}, t0)
	moved := a
	moved.Digest = digest('c')
	b4, _ := NewBundle("web", "dev", []Image{moved, s}, t0)
	if b3.ID == b1.ID || b4.ID == b1.ID || b3.ID == b4.ID {
		t.Errorf("another tag or another digest is another bundle: %s %s %s", b1.ID, b3.ID, b4.ID)
	}
}

func TestNewBundleRefuses(t *testing.T) {
	for name, imgs := range map[string][]Image{
		"no images":     nil,
		"no digest":     {{Repository: "reg/app", Tag: "1"}},
		"short digest":  {{Repository: "reg/app", Tag: "1", Digest: "sha256:abc"}},
		"two of a repo": {{Repository: "reg/app", Tag: "1", Digest: digest('a')}, {Repository: "reg/app", Tag: "2", Digest: digest('b')}},
		"no tag":        {{Repository: "reg/app", Digest: digest('a')}},
	} {
		if _, err := NewBundle("p", "dev", imgs, time.Time{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestBundleMapsByRepository(t *testing.T) {
	web := platform.ID{Namespace: "prod", Kind: "deployment", Name: "web"}
	hr := platform.ID{Namespace: "prod", Kind: "helmrelease", Name: "api"}
	b, _ := NewBundle("web", "dev", []Image{{"reg/app", "1.3.0", digest('a')}, {"reg/api", "2.0.0", digest('b')}}, time.Time{})
	got, err := b.Map([]Target{
		{Service: web, Container: "app", Repository: "reg/app", PinsDigest: true},
		{Service: web, Container: "proxy", Repository: "reg/envoy"},
		{Service: hr, Container: "chart-image", Repository: "reg/api"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{Service: web, Container: "app", Image: b.Images[1], Ref: "reg/app:1.3.0@" + digest('a')},
		{Service: hr, Container: "chart-image", Image: b.Images[0], Ref: "reg/api:2.0.0"},
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b platform.ID) bool { return a == b })); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if _, err := b.Map([]Target{{Service: web, Container: "app", Repository: "reg/app"}}); err == nil || !strings.Contains(err.Error(), "reg/api, which no service of the stage runs") {
		t.Errorf("a bundle image no service runs: %v", err)
	}
}
