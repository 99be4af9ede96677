package web

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/fluxd/fluxd/history"
	"github.com/fluxd/fluxd/internal/auth"
)

// SessionStore keeps sessions where every replica reads them, and a
// restart does not lose them (history.WebSessions).
type SessionStore interface {
	SaveSession(ctx context.Context, s history.WebSession, perToken, max int) (bool, error)
	Session(ctx context.Context, id string) (history.WebSession, error)
	DeleteSession(ctx context.Context, id string) error
}

// sealed is what a stored session keeps secret: sealed with AES-256-GCM
// under a key derived from the cookie's key, which the store never sees
// (it keeps the key's hash as the session's ID). A reader of the
// database can neither use a session nor learn its token.
type sealed struct {
	Token    string    `json:"token"`
	Instance string    `json:"instance"`
	Role     auth.Role `json:"role"`
	Name     string    `json:"name"`
	CSRF     string    `json:"csrf"`
	Created  time.Time `json:"created"`
	Expires  time.Time `json:"expires"`
}

// sessionID is the stored ID of a cookie's key.
func sessionID(key string) string {
	h := sha256.Sum256([]byte("fluxd web session id\x00" + key))
	return hex.EncodeToString(h[:])
}

// sessionAEAD is the cipher of a cookie's key: the key has 256 random
// bits, so one SHA-256 under its own label derives the cipher's key.
func sessionAEAD(key string) cipher.AEAD {
	k := sha256.Sum256([]byte("fluxd web session seal\x00" + key))
	block, _ := aes.NewCipher(k[:])
	aead, _ := cipher.NewGCM(block)
	return aead
}

func seal(key string, se *session) ([]byte, error) {
	b, err := json.Marshal(sealed{Token: se.token, Instance: se.id.Instance, Role: se.id.Role, Name: se.name, CSRF: se.csrf, Created: se.created, Expires: se.expires})
	if err != nil {
		return nil, err
	}
	aead := sessionAEAD(key)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	id := sessionID(key)
	return aead.Seal(nonce, nonce, b, []byte(id)), nil
}

func unseal(key string, b []byte) (*session, error) {
	aead := sessionAEAD(key)
	if len(b) < aead.NonceSize() {
		return nil, errors.New("sealed session too short")
	}
	plain, err := aead.Open(nil, b[:aead.NonceSize()], b[aead.NonceSize():], []byte(sessionID(key)))
	if err != nil {
		return nil, err
	}
	var s sealed
	if err := json.Unmarshal(plain, &s); err != nil {
		return nil, err
	}
	return &session{token: s.Token, id: auth.Identity{Instance: s.Instance, Role: s.Role}, name: s.Name, csrf: s.CSRF, created: s.Created, expires: s.Expires}, nil
}

// storeTimeout bounds a session's read or write.
const storeTimeout = 10 * time.Second

func (s *sessions) createStored(token string, se *session, key string) (string, *session) {
	b, err := seal(key, se)
	if err != nil {
		return "", nil
	}
	th := sha256.Sum256([]byte(token))
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	ok, err := s.store.SaveSession(ctx, history.WebSession{ID: sessionID(key), TokenHash: hex.EncodeToString(th[:]), Sealed: b,
		CreatedAt: se.created, ExpiresAt: se.expires}, s.perToken, s.max)
	if err != nil || !ok {
		return "", nil
	}
	return key, se
}

func (s *sessions) getStored(key string, now time.Time) *session {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	ws, err := s.store.Session(ctx, sessionID(key))
	if err != nil {
		return nil
	}
	se, err := unseal(key, ws.Sealed)
	if err != nil || now.After(se.expires) {
		return nil
	}
	return se
}

func (s *sessions) endStored(key string) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_ = s.store.DeleteSession(ctx, sessionID(key))
}
