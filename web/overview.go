package web

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

// overviewTTL is how long the plan of "every service to its newest
// allowed image" is shared before it is computed again.
const overviewTTL = 10 * time.Second

// overview shares the services page's plan ("every service to the newest
// image its policy allows"): it is planned against fluxd's clone without
// a fetch (fluxd polls git anyway), but still holds the release engine's
// lock and reads every manifest, so at most one computation runs per
// instance, role and scope at a time (singleflight), and its answer serves
// every caller of the same for overviewTTL (overviewKey).
type overview struct {
	group singleflight.Group

	mu    sync.Mutex
	cache map[string]overviewAnswer
}

type overviewAnswer struct {
	at   time.Time
	code int
	body []byte
}

// overviewKey names the plan id may share: its instance's and role's,
// within its scope. The scope is keyed by its content, as the tokens file
// writes it ("" for none), as daemon's kept answers are: a tokens file
// that narrows an instance's scope keys its callers' plans anew, so a
// plan of namespaces no longer in scope is not served for the rest of
// its overviewTTL.
func overviewKey(id auth.Identity) string {
	scope := ""
	if id.Scope != nil {
		scope = id.Scope.String()
	}
	return id.Instance + "\x00" + id.Role.String() + "\x00" + scope
}

// overviewRequest says whether body asks for the services page's plan:
// every service, each to its newest allowed image, a plan only. If so it
// returns the request to make instead: the same, planned against fluxd's
// clone as it is (cached), without a git fetch.
func overviewRequest(body []byte) ([]byte, bool) {
	var req fluxdv1.ReleaseRequest
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &req); err != nil {
		return nil, false
	}
	s := req.GetSpec()
	if !(req.GetKind() == fluxdv1.ReleaseKind_RELEASE_KIND_PLAN && s.GetAll() && s.GetAllLatest() &&
		len(s.GetServices()) == 0 && len(s.GetExclude()) == 0 && len(s.GetFiles()) == 0 && s.GetImage() == "" && !s.GetForce()) {
		return nil, false
	}
	s.Cached = true
	out, err := protojson.Marshal(&req)
	if err != nil {
		return nil, false
	}
	return out, true
}

// serve answers r from the shared plan of key, computing it with compute
// (which writes the answer) when it is older than overviewTTL.
func (o *overview) serve(w http.ResponseWriter, key string, now time.Time, compute func(http.ResponseWriter)) {
	o.mu.Lock()
	a, ok := o.cache[key]
	o.mu.Unlock()
	if !ok || now.Sub(a.at) >= overviewTTL {
		v, _, _ := o.group.Do(key, func() (any, error) {
			rec := httptest.NewRecorder()
			compute(rec)
			a := overviewAnswer{at: time.Now(), code: rec.Code, body: rec.Body.Bytes()}
			if rec.Code == http.StatusOK {
				o.mu.Lock()
				if o.cache == nil {
					o.cache = map[string]overviewAnswer{}
				}
				// Drop the plans no one will be served again,
				// a changed scope's among them.
				for k, old := range o.cache {
					if a.at.Sub(old.at) >= overviewTTL {
						delete(o.cache, k)
					}
				}
				o.cache[key] = a
				o.mu.Unlock()
			}
			return a, nil
		})
		a = v.(overviewAnswer)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.code)
	_, _ = io.Copy(w, bytes.NewReader(a.body))
}
