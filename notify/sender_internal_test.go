package notify

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A receiver's secret headers never follow a redirect to another host
// (found by review: GitLab's PRIVATE-TOKEN would have).
func TestSecretsDoNotFollowARedirectElsewhere(t *testing.T) {
	t.Parallel()
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("PRIVATE-TOKEN") != "" {
			t.Errorf("the token reached another host")
		}
	}))
	defer elsewhere.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/stolen", http.StatusTemporaryRedirect)
	}))
	defer receiver.Close()
	c := &http.Client{CheckRedirect: sameHostRedirect}
	req, _ := http.NewRequest(http.MethodPost, receiver.URL, strings.NewReader("{}"))
	req.Header.Set("PRIVATE-TOKEN", "secret")
	if _, err := c.Do(req); err == nil || !strings.Contains(err.Error(), "another host") {
		t.Errorf("redirect to another host: %v; want it refused", err)
	}
}
