package web

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"

	"github.com/fluxd/fluxd/internal/auth"
)

// session is one signed-in browser. The API token stays here, in the
// server's memory: the cookie carries only a random session key, so the
// token never reaches the browser's storage or a log of cookies, and each
// call still presents the token to the gRPC server's checks (a token
// removed from the tokens file stops working at once).
type session struct {
	token   string
	id      auth.Identity
	name    string
	csrf    string
	expires time.Time
}

// sessions holds the signed-in sessions by the SHA-256 of their key, so
// that looking one up compares no secret byte by byte.
type sessions struct {
	ttl time.Duration
	max int

	mu sync.Mutex
	m  map[[sha256.Size]byte]*session
}

func newSessions(ttl time.Duration, max int) *sessions {
	return &sessions{ttl: ttl, max: max, m: map[[sha256.Size]byte]*session{}}
}

// create starts a session and returns its key, for the cookie. It
// returns "" when there are too many sessions.
func (s *sessions) create(token string, id auth.Identity, name string, now time.Time) (string, *session) {
	key, csrf := randomString(), randomString()
	se := &session{token: token, id: id, name: name, csrf: csrf, expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.m) >= s.max {
		for k, v := range s.m {
			if now.After(v.expires) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= s.max {
			return "", nil
		}
	}
	s.m[sha256.Sum256([]byte(key))] = se
	return key, se
}

// get returns the live session of key, or nil.
func (s *sessions) get(key string, now time.Time) *session {
	if key == "" {
		return nil
	}
	h := sha256.Sum256([]byte(key))
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[h]
	if se == nil {
		return nil
	}
	if now.After(se.expires) {
		delete(s.m, h)
		return nil
	}
	return se
}

// end ends the session of key.
func (s *sessions) end(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, sha256.Sum256([]byte(key)))
}

func randomString() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
