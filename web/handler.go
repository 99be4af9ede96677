package web

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fluxd/fluxd/internal/auth"
	fluxdv1 "github.com/fluxd/fluxd/proto/fluxd/v1"
)

//go:embed static
var static embed.FS

// Authenticator resolves an API token to an identity, as the gRPC
// server's interceptors do (*auth.Store: hashed tokens, compared in
// constant time).
type Authenticator interface {
	Authenticate(token string) (auth.Identity, error)
}

// Config is the page's set-up.
type Config struct {
	// Auth checks tokens at sign-in and for the event stream.
	Auth Authenticator
	// Conn reaches the gRPC server in process (daemon.Server.InProcess):
	// the JSON API's calls pass its interceptors.
	Conn *grpc.ClientConn
	// Hub has the live events.
	Hub *Hub
	// SessionTTL bounds a session (default 12h).
	SessionTTL time.Duration
	// MaxSessions bounds the sessions kept (default 10000).
	MaxSessions int
	Log         *slog.Logger
}

// Validate reports every problem of the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Auth == nil {
		errs = append(errs, errors.New("web: no authenticator"))
	}
	if c.Conn == nil {
		errs = append(errs, errors.New("web: no connection to the gRPC server"))
	}
	if c.Hub == nil {
		errs = append(errs, errors.New("web: no event hub"))
	}
	return errors.Join(errs...)
}

// Handler serves the page, its JSON API and its events.
type Handler struct {
	cfg      Config
	sessions *sessions
	api      http.Handler
	mux      *http.ServeMux
	signIns  *rate.Limiter
	log      *slog.Logger
	now      func() time.Time
}

// writeTimeout bounds the writing of an answer other than the event
// stream.
const writeTimeout = 30 * time.Second

// sessionCookie names the session cookie; csrfHeader carries the
// session's CSRF token on every call made with the cookie.
const (
	sessionCookie = "fluxd_session"
	csrfHeader    = "X-CSRF-Token"
)

// contentSecurityPolicy lets the page load only its own scripts, styles
// and connections: no inline script, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// New returns the page's handler.
func New(ctx context.Context, cfg Config) (*Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 10000
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, &runtime.JSONPb{
			MarshalOptions:   marshal,
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		}),
		// Only the Authorization header reaches the server (the gateway
		// passes it on itself); no other header becomes metadata.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
	)
	if err := fluxdv1.RegisterFluxServiceHandlerClient(ctx, gw, fluxdv1.NewFluxServiceClient(cfg.Conn)); err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, sessions: newSessions(cfg.SessionTTL, cfg.MaxSessions), api: gw,
		signIns: rate.NewLimiter(5, 20), log: cfg.Log.With("component", "web"), now: time.Now}
	assets, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(assets)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, assets, "index.html")
	})
	mux.HandleFunc("POST /api/session", h.signIn)
	mux.HandleFunc("GET /api/session", h.whoAmI)
	mux.HandleFunc("DELETE /api/session", h.signOut)
	mux.HandleFunc("GET /api/events", h.events)
	mux.HandleFunc("POST /api/fluxd.v1.FluxService/", h.call)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s %s is not part of fluxd's JSON API: its calls are POST /api/fluxd.v1.FluxService/METHOD with the request as JSON, and GET /api/events.", r.Method, r.URL.Path))
	})
	h.mux = mux
	return h, nil
}

// ServeHTTP sets the security headers and serves the request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		hd.Set("Cache-Control", "no-store")
	}
	if r.URL.Path != "/api/events" {
		// The event stream sets a deadline per write; every other
		// answer must be written within this (the server has no
		// WriteTimeout, for the stream's sake).
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	h.mux.ServeHTTP(w, r)
}

// caller is who makes a request: by a bearer token, or by a session.
type caller struct {
	token   string
	id      auth.Identity
	session *session
}

// errNoCaller is a request with neither a token nor a session.
var errNoCaller = errors.New("sign in with an API token first: this request carries neither a session cookie nor an 'Authorization: Bearer TOKEN' header")

// authenticate finds the request's caller. A bearer token is checked as
// the API checks it; a session's token is checked again each time, so a
// token removed from the tokens file ends its sessions.
func (h *Handler) authenticate(r *http.Request) (caller, int, error) {
	if v := r.Header.Get("Authorization"); v != "" {
		scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
			return caller{}, http.StatusUnauthorized, errors.New("the Authorization header is not of the form 'Bearer TOKEN'")
		}
		token = strings.TrimSpace(token)
		id, err := h.cfg.Auth.Authenticate(token)
		if err != nil {
			return caller{}, authStatus(err), tokenError(err)
		}
		return caller{token: token, id: id}, 0, nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return caller{}, http.StatusUnauthorized, errNoCaller
	}
	se := h.sessions.get(c.Value, h.now())
	if se == nil {
		return caller{}, http.StatusUnauthorized, errors.New("your session has ended (it expired, you signed out, or fluxd restarted): sign in again")
	}
	id, err := h.cfg.Auth.Authenticate(se.token)
	if err != nil {
		if errors.Is(err, auth.ErrUnknownToken) {
			h.sessions.end(c.Value)
		}
		return caller{}, authStatus(err), tokenError(err)
	}
	return caller{token: se.token, id: id, session: se}, 0, nil
}

func authStatus(err error) int {
	if errors.Is(err, auth.ErrUnknownToken) {
		return http.StatusUnauthorized
	}
	return http.StatusServiceUnavailable
}

func tokenError(err error) error {
	if errors.Is(err, auth.ErrUnknownToken) {
		return errors.New("the API token was not accepted: it was mistyped or truncated, made for another fluxd, or removed from the daemon's tokens file. An admin makes one with 'fluxd token create --instance NAME --role viewer|deployer|admin'")
	}
	return errors.New("fluxd cannot check tokens just now: its tokens file cannot be read. An operator should look at the daemon's log")
}

// checkCSRF refuses a state-changing request made with the session
// cookie unless it carries the session's CSRF token (which another site's
// page cannot read) and, when the browser says where it comes from, comes
// from this page's origin. A bearer-token request carries no ambient
// credential, so it needs neither.
func (h *Handler) checkCSRF(r *http.Request, c caller) error {
	if err := sameOrigin(r); err != nil {
		return err
	}
	if c.session == nil {
		return nil
	}
	got := r.Header.Get(csrfHeader)
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(c.session.csrf)) != 1 {
		return fmt.Errorf("this request lacks the page's %s header: it did not come from fluxd's own page. Reload the page and try again", csrfHeader)
	}
	return nil
}

// sameOrigin refuses a request whose Origin (or, without one, Referer) is
// another site's.
func sameOrigin(r *http.Request) error {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	if src == "" || src == "null" && r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return nil
	}
	u, err := url.Parse(src)
	if err != nil || u.Host != r.Host {
		return fmt.Errorf("refused a request from %q: fluxd's page only takes requests from its own origin", src)
	}
	return nil
}

// call serves the JSON API: the request goes, with the caller's token,
// to the gRPC server's interceptors and methods.
func (h *Handler) call(w http.ResponseWriter, r *http.Request) {
	c, code, err := h.authenticate(r)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	if err := h.checkCSRF(r, c); err != nil {
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	r2 := r.Clone(r.Context())
	r2.Header = http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + c.token}}
	r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/api")
	r2.URL.RawPath = ""
	h.api.ServeHTTP(w, r2)
}

// signInRequest is the sign-in form.
type signInRequest struct {
	Token string `json:"token"`
	// Name is who signs in, for commits and history; optional.
	Name string `json:"name"`
}

// sessionInfo is what the page learns of its session.
type sessionInfo struct {
	Instance string `json:"instance"`
	Role     string `json:"role"`
	Name     string `json:"name"`
	CSRF     string `json:"csrf,omitempty"`
	CanAct   bool   `json:"canAct"`
}

func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	if !h.signIns.Allow() {
		writeError(w, http.StatusTooManyRequests, "too many sign-ins just now: wait a few seconds and try again")
		return
	}
	var req signInRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "the sign-in form could not be read: send JSON {\"token\": \"fxd_…\", \"name\": \"you\"}")
		return
	}
	req.Token, req.Name = strings.TrimSpace(req.Token), strings.TrimSpace(req.Name)
	if req.Token == "" {
		writeError(w, http.StatusBadRequest, "enter an API token: 'fluxd token create' makes one, and FLUX_TOKEN in .stack/env is the demo's")
		return
	}
	if len(req.Name) > 64 || strings.ContainsAny(req.Name, "\n\r<>") {
		writeError(w, http.StatusBadRequest, "the name must be at most 64 characters, on one line, without < or >")
		return
	}
	id, err := h.cfg.Auth.Authenticate(req.Token)
	if err != nil {
		h.log.Info("sign-in refused", "remote", r.RemoteAddr, "error", err)
		writeError(w, authStatus(err), tokenError(err).Error())
		return
	}
	key, se := h.sessions.create(req.Token, id, req.Name, h.now())
	if se == nil {
		writeError(w, http.StatusServiceUnavailable, "fluxd holds too many sessions just now: try again later, or use an Authorization header")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: key, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(h.cfg.SessionTTL.Seconds())})
	h.log.Info("signed in", "instance", id.Instance, "role", id.Role.String(), "name", req.Name)
	writeJSON(w, http.StatusOK, info(caller{token: req.Token, id: id, session: se}))
}

func (h *Handler) whoAmI(w http.ResponseWriter, r *http.Request) {
	c, code, err := h.authenticate(r)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, info(c))
}

func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	c, code, err := h.authenticate(r)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	if err := h.checkCSRF(r, c); err != nil {
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	if ck, err := r.Cookie(sessionCookie); err == nil {
		h.sessions.end(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

func info(c caller) sessionInfo {
	si := sessionInfo{Instance: c.id.Instance, Role: c.id.Role.String(), CanAct: c.id.Allows(auth.Deployer)}
	if c.session != nil {
		si.Name, si.CSRF = c.session.name, c.session.csrf
	}
	return si
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers as the JSON API does: {"code", "message"}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]any{"code": code, "message": msg})
}
