package auth

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/fluxd/fluxd/internal/filestamp"
)

// TokenPrefix starts every token fluxd makes, so that a leaked token is easy
// to recognise in a log or a secret scanner.
const TokenPrefix = "fxd_"

// Store holds the hashed tokens of one tokens file and reloads it when the
// file changes, so a token created while fluxd runs works at once.
//
// The file has one token per line: "sha256:<hex> <instance> <role>",
// optionally followed by "name=NAME", the token holder's name.
// A line "scope <instance> namespaces=NS[,NS...] [paths=PATH[,PATH...]]"
// gives an instance its scope (at most one per instance; it applies to
// all of the instance's tokens). Blank lines and lines starting with '#'
// are ignored.
type Store struct {
	path string

	mu      sync.Mutex
	entries []entry
	// byHash indexes entries by their token's hash, rebuilt with them on
	// every reload: a call costs one lookup and one constant-time
	// compare, however many tokens the file holds, and a token removed
	// from the file is gone from the index at the reload that sees it.
	// It holds hashes only, as the file does: never a token.
	byHash map[[sha256.Size]byte]int
	scopes map[string]*Scope
	// stamp is what stat said of the file before it was last read, sum
	// the SHA-256 of the bytes then read, and racy says the file may have
	// changed since without its stamp changing (see reload).
	stamp fileStamp
	sum   [sha256.Size]byte
	racy  bool
	// now is the clock that judges racy stamps, and stampOf reads a
	// stamp from stat; tests replace them.
	now     func() time.Time
	stampOf func(fs.FileInfo) fileStamp
}

// fileStamp is what stat says of the tokens file: when it differs from
// the last read's, the file is read again. Without a change time (ctime
// 0) the stamp cannot tell a same-size rewrite with its mtime restored, so
// the store compares the file's content on every call.
type fileStamp = filestamp.Stamp

// racyWindow is how long after a file's last change (its ctime) a stamp
// is not trusted alone. A write lands in the same timestamp as the change
// before it when both fall in one tick of the filesystem's clock: a jiffy
// (1-10 ms) on Linux's ext4, xfs and tmpfs, a second on ext4 with small
// inodes, some NFS servers and FUSE filesystems, two on FAT. Two seconds
// covers them all, with the slack of a clock that lags.
const racyWindow = 2 * time.Second

type entry struct {
	hash [sha256.Size]byte
	id   Identity
}

// ErrUnknownToken is returned by Authenticate for a token that is not in
// the tokens file.
var ErrUnknownToken = errors.New("unknown token")

var instanceRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,62})$`)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$`)

// ValidateName reports whether s is a usable token holder's name: it
// goes into commits' authors and history, so it is one plain word.
func ValidateName(s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("token name %q is not valid: use 1-64 letters, digits, '.', '_', '@', '+' or '-', starting with a letter or digit (alice, jane.doe, ci-bot)", s)
	}
	return nil
}

// ValidateInstance reports whether s is a usable instance ID.
func ValidateInstance(s string) error {
	if !instanceRE.MatchString(s) {
		return fmt.Errorf("instance ID %q is not valid: use 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit", s)
	}
	return nil
}

// Open loads the tokens file at path. The file must exist; an empty file is
// allowed (every call is then refused).
func Open(path string) (*Store, error) {
	s := &Store{path: path, now: time.Now, stampOf: filestamp.Of}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Authenticate returns the identity of token, or ErrUnknownToken.
func (s *Store) Authenticate(token string) (Identity, error) {
	if err := s.reload(); err != nil {
		return Identity{}, err
	}
	sum := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	// The lookup compares SHA-256 digests, whose timing says nothing
	// usable about a token; the entry found is confirmed in constant time.
	i, ok := s.byHash[sum]
	if !ok || subtle.ConstantTimeCompare(sum[:], s.entries[i].hash[:]) != 1 {
		return Identity{}, ErrUnknownToken
	}
	return s.entries[i].id, nil
}

// index maps each token hash to its entry, the last line naming it
// winning (as when every entry was compared in turn).
func index(entries []entry) map[[sha256.Size]byte]int {
	m := make(map[[sha256.Size]byte]int, len(entries))
	for i, e := range entries {
		m[e.hash] = i
	}
	return m
}

// reload re-reads the file when it changed. The store is consulted on
// every call, so in the common case this is one stat: the file is read
// again when its stamp (device, inode, ctime, mtime, size) differs from
// the last read's. The mtime and size alone are not enough: 'cp -p',
// 'touch -r' or a same-size rewrite in the tick of the last one keeps
// both, and a revoked token would keep working. The ctime cannot be set
// by users, and a rename changes the inode.
//
// A stamp is still blind to a second write within the same tick of the
// filesystem's clock as the change it records. So, as git does with its
// "racily clean" index entries, a file read less than racyWindow after
// its ctime is racy: until a read happens after that window, each call
// compares the file's content (a SHA-256 of its bytes) with the last
// read's. That costs a read of the file per call for a couple of
// seconds after each change, and a stat per call otherwise.
func (s *Store) reload() error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("reading tokens file: %w", err)
	}
	// Stat first, read after: a change between the two leaves a stamp
	// older than the content, which the next call reads again.
	st := s.stampOf(fi)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries != nil && st == s.stamp && !s.racy {
		return nil
	}
	// The ctime is judged against the read's start: a write after it
	// bears a later ctime once the read starts a window past the ctime.
	read := s.now()
	data, err := os.ReadFile(s.path)
	if err != nil {
		return fmt.Errorf("reading tokens file: %w", err)
	}
	sum := sha256.Sum256(data)
	if s.entries == nil || sum != s.sum {
		entries, scopes, err := parse(s.path, data)
		if err != nil {
			return err
		}
		s.entries, s.byHash, s.scopes = entries, index(entries), scopes
	}
	s.stamp, s.sum = st, sum
	// Without a ctime (not Linux) every stamp is racy.
	s.racy = st.Ctime == 0 || read.UnixNano()-st.Ctime < int64(racyWindow)
	return nil
}

// ScopeOf is instance's scope, nil when it has none, from the tokens file
// as it is now (read again when it changed; when it cannot be read, as it
// was last read).
func (s *Store) ScopeOf(instance string) *Scope {
	_ = s.reload()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scopes[instance]
}

// Instances lists the instances the tokens file names (by a token or a
// scope line) with their scopes, nil for an unscoped one.
func (s *Store) Instances() map[string]*Scope {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]*Scope{}
	for _, e := range s.entries {
		out[e.id.Instance] = e.id.Scope
	}
	for inst, sc := range s.scopes {
		out[inst] = sc
	}
	return out
}

func parseFile(path string) ([]entry, map[string]*Scope, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading tokens file: %w", err)
	}
	return parse(path, data)
}

// parse reads the tokens file's content, data, read from path.
func parse(path string, data []byte) ([]entry, map[string]*Scope, error) {
	entries := []entry{}
	scopes := map[string]*Scope{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if fields := strings.Fields(line); fields[0] == "scope" {
			inst, scope, err := parseScopeLine(fields)
			if err == nil && scopes[inst] != nil {
				err = fmt.Errorf("instance %s has a scope already, on an earlier line: give each instance one scope line", inst)
			}
			if err != nil {
				return nil, nil, fmt.Errorf("tokens file %s, line %d: %w", path, n, err)
			}
			scopes[inst] = scope
			continue
		}
		e, err := parseLine(line)
		if err != nil {
			return nil, nil, fmt.Errorf("tokens file %s, line %d: %w", path, n, err)
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading tokens file %s: %w", path, err)
	}
	// A scope line applies to the instance's tokens wherever it is.
	for i := range entries {
		entries[i].id.Scope = scopes[entries[i].id.Instance]
	}
	return entries, scopes, nil
}

// parseScopeLine parses "scope <instance> namespaces=... [paths=...]".
func parseScopeLine(fields []string) (string, *Scope, error) {
	if len(fields) < 3 {
		return "", nil, errors.New(`want "scope <instance> namespaces=NS[,NS...] [paths=PATH[,PATH...]]"`)
	}
	if err := ValidateInstance(fields[1]); err != nil {
		return "", nil, err
	}
	s, err := parseScope(fields[2:])
	if err != nil {
		return "", nil, fmt.Errorf("scope of %s: %w", fields[1], err)
	}
	return fields[1], s, nil
}

func parseLine(line string) (entry, error) {
	fields := strings.Fields(line)
	var name string
	if len(fields) == 4 {
		var ok bool
		if name, ok = strings.CutPrefix(fields[3], "name="); !ok {
			return entry{}, errors.New(`want "sha256:<hex> <instance> <role> [name=NAME]"`)
		}
		if err := ValidateName(name); err != nil {
			return entry{}, err
		}
		fields = fields[:3]
	}
	if len(fields) != 3 {
		return entry{}, errors.New(`want "sha256:<hex> <instance> <role> [name=NAME]"`)
	}
	hexHash, ok := strings.CutPrefix(fields[0], "sha256:")
	if !ok {
		return entry{}, errors.New(`the hash must start with "sha256:" (plain tokens are never stored)`)
	}
	raw, err := hex.DecodeString(hexHash)
	if err != nil || len(raw) != sha256.Size {
		return entry{}, errors.New("the hash is not 64 hexadecimal digits")
	}
	if err := ValidateInstance(fields[1]); err != nil {
		return entry{}, err
	}
	role, err := ParseRole(fields[2])
	if err != nil {
		return entry{}, err
	}
	var e entry
	copy(e.hash[:], raw)
	e.id = Identity{Instance: fields[1], Role: role, Name: name}
	return e, nil
}

// Create makes a new random token for id, appends its hash to the tokens
// file at path (creating the file, mode 0600, if needed) and returns the
// plain token. The plain token is not kept anywhere.
func Create(path string, id Identity) (string, error) {
	if err := ValidateInstance(id.Instance); err != nil {
		return "", err
	}
	if id.Role < Viewer || id.Role > Admin {
		return "", fmt.Errorf("unknown role %v", id.Role)
	}
	if id.Name != "" {
		if err := ValidateName(id.Name); err != nil {
			return "", err
		}
	}
	if _, _, err := parseFile(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("refusing to append to a tokens file that does not parse: %w", err)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	sum := sha256.Sum256([]byte(token))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return "", fmt.Errorf("opening tokens file: %w", err)
	}
	line := fmt.Sprintf("sha256:%s %s %s", hex.EncodeToString(sum[:]), id.Instance, id.Role)
	if id.Name != "" {
		line += " name=" + id.Name
	}
	line += "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return "", fmt.Errorf("writing tokens file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("writing tokens file: %w", err)
	}
	return token, nil
}

// AddScope gives instance its scope in the tokens file at path (created,
// mode 0600, if needed) by appending a scope line, unless the file gives
// it that scope already. It refuses to change a scope the file gives it
// already: that is an edit of the file, which the operator makes.
func AddScope(path, instance string, scope *Scope) error {
	if err := ValidateInstance(instance); err != nil {
		return err
	}
	fields := []string{"namespaces=" + strings.Join(scope.Namespaces, ",")}
	if len(scope.Paths) > 0 {
		fields = append(fields, "paths="+strings.Join(scope.Paths, ","))
	}
	sc, err := parseScope(fields)
	if err != nil {
		return err
	}
	_, scopes, err := parseFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("refusing to append to a tokens file that does not parse: %w", err)
	}
	if old := scopes[instance]; old != nil {
		if old.String() == sc.String() {
			return nil
		}
		return fmt.Errorf("instance %s has the scope %s in %s already; edit its scope line there to change it", instance, old, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("opening tokens file: %w", err)
	}
	if _, err := fmt.Fprintf(f, "scope %s %s\n", instance, sc); err != nil {
		f.Close()
		return fmt.Errorf("writing tokens file: %w", err)
	}
	return f.Close()
}
