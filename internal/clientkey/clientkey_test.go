package clientkey

import (
	"net"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestOneKeyPerIPv4AddressAndPerIPv6Slash64(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"},
		{"fe80::1%eth0", "fe80::2"},
	} {
		if ka, kb := Of(netip.MustParseAddr(tc.a)), Of(netip.MustParseAddr(tc.b)); ka != kb || ka == "" {
			t.Errorf("%s and %s: keys %q and %q, want one key", tc.a, tc.b, ka, kb)
		}
	}
	for _, tc := range []struct{ a, b string }{
		{"192.0.2.1", "192.0.2.2"},
		{"2001:db8:1:2::1", "2001:db8:1:3::1"},
	} {
		if ka, kb := Of(netip.MustParseAddr(tc.a)), Of(netip.MustParseAddr(tc.b)); ka == kb {
			t.Errorf("%s and %s: one key %q, want two", tc.a, tc.b, ka)
		}
	}
	if k := OfAddr(&net.TCPAddr{IP: net.ParseIP("2001:db8::7"), Port: 443}); k != "2001:db8::/64" {
		t.Errorf("OfAddr of [2001:db8::7]:443 = %q", k)
	}
	if k := OfAddr(&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}); k != "" {
		t.Errorf("OfAddr of a Unix socket = %q, want none", k)
	}
}

func TestClientIsReadPastTrustedProxiesOnly(t *testing.T) {
	proxies, err := ParseProxies([]string{"10.0.0.0/8", " 192.0.2.1 ", "::ffff:172.16.0.0/108"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"no proxy: the peer", "198.51.100.1:1", nil, "198.51.100.1"},
		{"an untrusted peer's header is ignored", "198.51.100.1:1", []string{"203.0.113.9"}, "198.51.100.1"},
		{"a trusted proxy's header names the client", "10.1.2.3:1", []string{"203.0.113.9"}, "203.0.113.9"},
		{"what the client wrote further left is ignored", "10.1.2.3:1", []string{"6.6.6.6, 203.0.113.9"}, "203.0.113.9"},
		{"past every trusted proxy, over several headers", "10.1.2.3:1", []string{"6.6.6.6, 203.0.113.9", "192.0.2.1, 10.9.9.9"}, "203.0.113.9"},
		{"a malformed hop stops at the last proxy", "10.1.2.3:1", []string{"203.0.113.9, junk"}, "10.1.2.3"},
		{"a mapped proxy CIDR", "172.16.0.5:1", []string{"203.0.113.9"}, "203.0.113.9"},
		{"only proxies: the outermost", "10.1.2.3:1", []string{"10.4.4.4"}, "10.4.4.4"},
		{"a hop with a port", "10.1.2.3:1", []string{"203.0.113.9:5678"}, "203.0.113.9"},
		{"an IPv6 hop with a port", "10.1.2.3:1", []string{"[2001:db8::7]:443"}, "2001:db8::7"},
		{"a proxy hop with a port is passed", "10.1.2.3:1", []string{"203.0.113.9, 10.9.9.9:80"}, "203.0.113.9"},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := proxies.Client(r).String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := ParseProxies([]string{"10.0.0.0/8", "not-a-cidr"}); err == nil || !strings.Contains(err.Error(), `"not-a-cidr"`) || !strings.Contains(err.Error(), "--trusted-proxies") {
		t.Errorf("a malformed proxy: %v", err)
	}
}

// A table full of clients forgets the least recently used one, not
// everyone: a client that keeps failing stays limited however many new
// addresses arrive.
func TestLimitsForgetTheOldestClientNotEveryone(t *testing.T) {
	l := NewLimits(100, rate.Every(time.Hour), 1)
	if !l.Get("attacker").Allow() {
		t.Fatal("the first try is allowed")
	}
	for i := range 1000 {
		l.Get("203.0.113." + strconv.Itoa(i)).Allow()
		l.Get("attacker") // still active: the most recently used
	}
	if l.Get("attacker").Allow() {
		t.Error("after 1,000 other clients the active attacker was forgotten and allowed again")
	}
	if l.Len() != 100 {
		t.Errorf("%d clients kept, want 100", l.Len())
	}
	if !l.Get("203.0.113.0").Allow() {
		t.Error("the least recently used client is still limited: it was never forgotten")
	}
}

func TestRecentForgetsAfterItsTime(t *testing.T) {
	r := NewRecent(2, time.Minute)
	now := time.Now()
	r.Saw("a", now)
	if !r.Seen("a", now.Add(time.Second)) || r.Seen("a", now.Add(2*time.Minute)) || r.Seen("b", now) {
		t.Error("Recent does not remember a for a minute only")
	}
	r.Saw("a", now)
	r.Saw("b", now)
	r.Saw("c", now)
	if r.Seen("a", now) || !r.Seen("c", now) {
		t.Error("Recent does not forget the least recent first")
	}
}
