package history

import (
	"context"
	"time"
)

// WebSession is a signed-in status page, kept in the store so that it
// survives a restart and works on every replica. Nothing in it lets a
// reader of the database act: the session's key (the browser's cookie)
// is stored only as its hash, and the API token, identity and CSRF
// value are sealed under a key derived from the cookie's key (web).
type WebSession struct {
	// ID is the hex SHA-256 of the cookie's key.
	ID string
	// TokenHash is the hex SHA-256 of the API token, to bound one
	// token's sessions.
	TokenHash string
	// Sealed is the session's secrets, encrypted.
	Sealed    []byte
	CreatedAt time.Time
	ExpiresAt time.Time
}

// WebSessions keeps the status page's sessions.
type WebSessions interface {
	// SaveSession stores s: first the expired sessions are deleted, and
	// the oldest of its token's beyond perToken-1; it stores nothing
	// and returns false when max sessions are live even so.
	SaveSession(ctx context.Context, s WebSession, perToken, max int) (bool, error)
	// Session returns the session of id, or an error wrapping
	// ErrNotFound (also once it has expired).
	Session(ctx context.Context, id string) (WebSession, error)
	// DeleteSession ends the session of id.
	DeleteSession(ctx context.Context, id string) error
}
