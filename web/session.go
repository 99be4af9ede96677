package web

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
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
	created time.Time
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
	// perToken bounds the sessions of one token: a new sign-in beyond it
	// ends the token's oldest session, so one token cannot fill the
	// table and lock everyone else out.
	perToken int

	// store, when set, keeps the sessions instead of m (UseStore).
	store SessionStore

	mu sync.Mutex
	m  map[[sha256.Size]byte]*session
}

func newSessions(ttl time.Duration, max int) *sessions {
	return &sessions{ttl: ttl, max: max, perToken: maxSessionsPerToken, m: map[[sha256.Size]byte]*session{}}
}

// create starts a session and returns its key, for the cookie. It
// returns "" when there are too many sessions.
func (s *sessions) create(token string, id auth.Identity, name string, now time.Time) (string, *session) {
	key, csrf := randomString(), randomString()
	se := &session{token: token, id: id, name: name, csrf: csrf, created: now, expires: now.Add(s.ttl)}
	if s.store != nil {
		return s.createStored(token, se, key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The token's sessions: beyond perToken, the oldest ends. (A scan:
	// sign-ins are rate-limited and the table is bounded.)
	var oldest [sha256.Size]byte
	n := 0
	for k, v := range s.m {
		if subtle.ConstantTimeCompare([]byte(v.token), []byte(token)) != 1 {
			continue
		}
		if n == 0 || v.created.Before(s.m[oldest].created) {
			oldest = k
		}
		n++
	}
	if n >= s.perToken {
		delete(s.m, oldest)
	}
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
	if s.store != nil {
		return s.getStored(key, now)
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
	if s.store != nil {
		s.endStored(key)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, sha256.Sum256([]byte(key)))
}

// maxSessionsPerToken bounds one token's sessions.
const maxSessionsPerToken = 32

func randomString() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
