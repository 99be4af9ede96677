package web

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/fluxd/fluxd/internal/auth"
	"github.com/fluxd/fluxd/internal/clientkey"
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
	// Live says whether the hub hears of jobs and automator passes: on a
	// follower replica (false) they run elsewhere, and the page polls.
	// nil: always.
	Live func() bool
	// SecureCookie says the page is reached over HTTPS although fluxd
	// serves plain HTTP (a TLS-terminating proxy in front): the cookie is
	// then Secure and __Host- prefixed, and HSTS is sent, as under
	// --tls-cert-file. (No forwarded header is trusted for this.)
	SecureCookie bool
	// SessionTTL bounds a session (default 12h).
	SessionTTL time.Duration
	// MaxSessions bounds the sessions kept (default 10000).
	MaxSessions int
	// TrustedProxies are the proxies (an Ingress) whose X-Forwarded-For
	// names the client (--trusted-proxies): failed sign-ins are counted
	// by that client (clientkey: an IPv4 address, an IPv6 /64). Empty:
	// the connection's address, and no header, is believed.
	TrustedProxies clientkey.Proxies
	// Sessions, when set, keeps the sessions (hashed and sealed) where
	// every replica finds them and a restart does not lose them;
	// without it they are kept in this process's memory.
	Sessions SessionStore
	// GitWebURL, when set, is the forge's prefix for commits (--git-web-url):
	// GitWebURL + "/" + COMMIT is a commit's page, and the page links
	// commits there.
	GitWebURL string
	// Syncs says fluxd syncs git to the cluster (--sync-interval): the
	// page offers a Sync, its dry run shown first.
	Syncs bool
	Log   *slog.Logger
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
	if err := ValidateGitWebURL(c.GitWebURL); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Handler serves the page, its JSON API and its events.
type Handler struct {
	cfg      Config
	sessions *sessions
	api      http.Handler
	// gw and jsonpb are the gateway behind api and its marshaler, which
	// the kept answers' path (listservices.go) writes errors with.
	gw       *runtime.ServeMux
	jsonpb   *runtime.JSONPb
	mux      *http.ServeMux
	signIns  *clientkey.Limits
	overview overview
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
	// secureCookie names it when the page is served over HTTPS: the
	// __Host- prefix makes browsers take it only when Secure, for this
	// host alone and the whole path, so a sibling subdomain or a plain
	// HTTP page cannot plant or override it.
	secureCookie = "__Host-fluxd_session"
	csrfHeader   = "X-CSRF-Token"
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
	jsonpb := &runtime.JSONPb{
		MarshalOptions:   marshal,
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
	}
	gw := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, jsonpb),
		// Only the Authorization header reaches the server (the gateway
		// passes it on itself); no other header becomes metadata.
		runtime.WithIncomingHeaderMatcher(func(string) (string, bool) { return "", false }),
		runtime.WithOutgoingHeaderMatcher(func(string) (string, bool) { return "", false }),
	)
	if err := fluxdv1.RegisterFluxServiceHandlerClient(ctx, gw, fluxdv1.NewFluxServiceClient(cfg.Conn)); err != nil {
		return nil, err
	}
	ss := newSessions(cfg.SessionTTL, cfg.MaxSessions)
	ss.store = cfg.Sessions
	h := &Handler{cfg: cfg, sessions: ss, api: gw, gw: gw, jsonpb: jsonpb,
		signIns: newFailures(), log: cfg.Log.With("component", "web"), now: time.Now}
	assets, err := fs.Sub(static, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", scripts(http.FileServerFS(assets))))
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
	if h.secure(r) {
		hd.Set("Strict-Transport-Security", "max-age=31536000")
	}
	if r.URL.Path != "/api/events" {
		// The event stream sets a deadline per write; every other
		// answer must be written within this (the server has no
		// WriteTimeout, for the stream's sake).
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	h.mux.ServeHTTP(w, r)
}

// scripts serves the page's ES modules as text/javascript whatever the
// host's MIME table says (Windows' registry has mapped .js to text/plain):
// a browser runs a module script of no other type, nosniff or not.
func scripts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".js") {
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
		}
		next.ServeHTTP(w, r)
	})
}

// secure says whether the page is reached over HTTPS.
func (h *Handler) secure(r *http.Request) bool { return r.TLS != nil || h.cfg.SecureCookie }

func (h *Handler) cookieName(r *http.Request) string {
	if h.secure(r) {
		return secureCookie
	}
	return sessionCookie
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
	c, err := r.Cookie(h.cookieName(r))
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

// pageMethods are the methods the page calls: a session (cookie) caller
// may call only these, so that a page's session, were it ever abused, does
// no more than the page itself; a bearer-token caller may call whatever
// its role allows.
var pageMethods = map[string]bool{
	"ListServices": true, "ListImages": true, "Release": true, "GetJob": true, "CancelJob": true,
	"ListJobs": true, "GetJobLog": true, "Lock": true, "Unlock": true, "History": true, "Sync": true,
	"Automate": true, "Deautomate": true, "SetPolicy": true, "GetResources": true, "GetPodLog": true, "GetManifest": true,
	// The pipelines view: reading is a viewer's (as is a promotion's
	// plan); Promote's execution, Approve and ResumeStage need the
	// deployer role in the stage's scope, which the gRPC server checks.
	"ListPipelines": true, "ListStages": true, "ListBundles": true, "Promote": true, "Approve": true, "ResumeStage": true,
}

const pageMethodList = "ListServices, ListImages, Release, GetJob, CancelJob, ListJobs, GetJobLog, Lock, Unlock, History, Sync, " +
	"Automate, Deautomate, SetPolicy, GetResources, GetPodLog, GetManifest, ListPipelines, ListStages, ListBundles, Promote, Approve, ResumeStage"

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
	method := strings.TrimPrefix(r.URL.Path, "/api/fluxd.v1.FluxService/")
	if method == "WatchJob" {
		writeError(w, http.StatusNotImplemented, "WatchJob streams, and the JSON API does not serve streams: follow jobs with GET /api/events (Server-Sent Events), or call WatchJob over gRPC ('fluxctl release --watch')")
		return
	}
	if c.session != nil && !pageMethods[method] {
		writeError(w, http.StatusForbidden, fmt.Sprintf("%s cannot be called with the page's session cookie: a session may call only what the page uses (%s). Tools call it with 'Authorization: Bearer TOKEN', or over gRPC with fluxctl", method, pageMethodList))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if method == "Release" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, "the request is too large: at most 1 MiB")
			return
		}
		if cached, ok := overviewRequest(body); ok {
			// The services page's plan: shared, see overview. The
			// computation outlives a caller that goes away.
			ctx := context.WithoutCancel(r.Context())
			h.overview.serve(w, overviewKey(c.id), h.now(), func(w http.ResponseWriter) {
				h.forward(w, r.WithContext(ctx), c, cached)
			})
			return
		}
		h.forward(w, r, c, body)
		return
	}
	if method == "ListServices" {
		h.listServices(w, r, c)
		return
	}
	h.forward(w, r, c, nil)
}

// forward passes the call to the gRPC server through the gateway, with
// the caller's token (and body, when it was read already).
func (h *Handler) forward(w http.ResponseWriter, r *http.Request, c caller, body []byte) {
	r2 := r.Clone(r.Context())
	if body != nil {
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
	}
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
	// LiveEvents is false on a follower replica: jobs and automation run
	// on the leader, the event stream does not tell of them, the page
	// polls.
	LiveEvents bool `json:"liveEvents"`
	// GitWebURL is the forge's commit prefix (--git-web-url), or empty.
	GitWebURL string `json:"gitWebUrl,omitempty"`
	// Syncs says fluxd syncs git to the cluster: the page offers Sync.
	Syncs bool `json:"syncs"`
}

func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	if err := sameOrigin(r); err != nil {
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "send the sign-in form as JSON, with 'Content-Type: application/json': {\"token\": \"fxd_…\", \"name\": \"you\"}")
		return
	}
	// Only failed sign-ins count, per client address; a token that
	// authenticates is never refused for failures, its address's or
	// anyone else's (behind an Ingress, every user shares one address).
	// Tokens are 256-bit random values: guessing is not what this limit
	// stops, but a flood of failures filling the log.
	failures := h.signIns.Get(h.cfg.TrustedProxies.Key(r))
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
		if errors.Is(err, auth.ErrUnknownToken) && !failures.Allow() {
			writeError(w, http.StatusTooManyRequests, "too many failed sign-ins from your address just now: wait a minute and try again")
			return
		}
		h.log.Info("sign-in refused", "remote", h.clientIP(r), "error", err)
		writeError(w, authStatus(err), tokenError(err).Error())
		return
	}
	// The session this browser presents, if any, ends: a new sign-in
	// replaces it rather than leaving it live.
	if ck, err := r.Cookie(h.cookieName(r)); err == nil {
		h.sessions.end(ck.Value)
	}
	key, se := h.sessions.create(req.Token, id, req.Name, h.now())
	if se == nil {
		writeError(w, http.StatusServiceUnavailable, "fluxd cannot start a session just now: it holds too many, or its history database (where sessions are kept) does not answer. Try again later, or use an Authorization header")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: h.cookieName(r), Value: key, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: h.secure(r), MaxAge: int(h.cfg.SessionTTL.Seconds())})
	h.log.Info("signed in", "instance", id.Instance, "role", id.Role.String(), "name", req.Name)
	writeJSON(w, http.StatusOK, h.info(caller{token: req.Token, id: id, session: se}))
}

func (h *Handler) whoAmI(w http.ResponseWriter, r *http.Request) {
	c, code, err := h.authenticate(r)
	if err != nil {
		writeError(w, code, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, h.info(c))
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
	if ck, err := r.Cookie(h.cookieName(r)); err == nil {
		h.sessions.end(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: h.cookieName(r), Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r), MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) info(c caller) sessionInfo {
	si := sessionInfo{Instance: c.id.Instance, Role: c.id.Role.String(), CanAct: c.id.Allows(auth.Deployer), LiveEvents: h.cfg.Live == nil || h.cfg.Live(),
		GitWebURL: strings.TrimRight(h.cfg.GitWebURL, "/"), Syncs: h.cfg.Syncs}
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

// newFailures limits failed sign-ins per client (clientkey): 10 at once,
// then one every 6 s. It keeps maxFailureClients clients; beyond, the
// one heard from least recently is forgotten, never everyone at once.
func newFailures() *clientkey.Limits {
	return clientkey.NewLimits(maxFailureClients, rate.Every(6*time.Second), 10)
}

const maxFailureClients = 10000

// clientIP is the address the request comes from: the connection's, or
// the client a trusted proxy names (clientkey.Proxies.Client).
func (h *Handler) clientIP(r *http.Request) string {
	if a := h.cfg.TrustedProxies.Client(r); a.IsValid() {
		return a.String()
	}
	return r.RemoteAddr
}
