package gogit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	skeema "github.com/skeema/knownhosts"

	"github.com/fluxd/fluxd/gitrepo"
	"github.com/fluxd/fluxd/internal/giturl"
)

// keyComment ends the public key fluxd generates, so that a deploy key
// page shows whose key it is.
const keyComment = "fluxd"

// IsSSH reports whether url is an SSH remote: ssh://[user@]host[:port]/path
// or the scp-like user@host:path.
//
// It is giturl.IsSSH, which 'fluxctl install' uses too, so that both agree
// (TestIsSSHAgreesWithGoGit checks it against go-git's own parser).
func IsSSH(url string) bool { return giturl.IsSSH(url) }

// UnknownHostError is an SSH host whose key is not in the known hosts
// file: fluxd does not connect to it.
type UnknownHostError struct {
	// Host is the address dialled, host:port.
	Host string
	// Key is the key the host presented.
	Key ssh.PublicKey
	// File is the known hosts file.
	File string
}

func (e *UnknownHostError) Error() string {
	return fmt.Sprintf("the host key of %s (%s %s) is not in --git-ssh-known-hosts-file %s", e.Host, e.Key.Type(), ssh.FingerprintSHA256(e.Key), e.File)
}

// HostKeyMismatchError is an SSH host that presented a key other than
// the one the known hosts file lists for it.
type HostKeyMismatchError struct {
	Host string
	Key  ssh.PublicKey
	File string
	// Line is the known hosts line of the key expected.
	Line int
}

func (e *HostKeyMismatchError) Error() string {
	return fmt.Sprintf("the host key of %s (%s %s) does not match the one in --git-ssh-known-hosts-file %s (line %d)", e.Host, e.Key.Type(), ssh.FingerprintSHA256(e.Key), e.File, e.Line)
}

// KeyRefusedError is an SSH host that refused fluxd's key.
type KeyRefusedError struct {
	Host string
	Key  gitrepo.DeployKey
	Err  error
}

func (e *KeyRefusedError) Error() string {
	return fmt.Sprintf("%s refused fluxd's key %s; add this public key as a deploy key with write access: %s", e.Host, e.Key.Fingerprint, e.Key.PublicKey)
}

func (e *KeyRefusedError) Unwrap() error { return e.Err }

// LoadKey reads the private key at path (OpenSSH or PEM form, without a
// passphrase). With generate, a missing key is created: ed25519, written
// to path (0600) and path.pub, and kept from then on.
func LoadKey(path string, generate bool) (ssh.Signer, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && generate {
		return generateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the SSH key: %w", err)
	}
	return ParseKey(b, path)
}

// GenerateKeyPEM makes a new ed25519 private key, in OpenSSH's PEM form,
// for a deploy key kept elsewhere than a file (a Kubernetes Secret).
func GenerateKeyPEM() ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, keyComment)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(block), nil
}

// ParseKey parses a private key in OpenSSH or PEM form, without a
// passphrase; from says where it came from, for errors.
func ParseKey(b []byte, from string) (ssh.Signer, error) {
	signer, err := ssh.ParsePrivateKey(b)
	var pass *ssh.PassphraseMissingError
	if errors.As(err, &pass) {
		return nil, fmt.Errorf("the SSH key %s has a passphrase; fluxd needs one without (keep it where only fluxd may read it)", from)
	}
	if err != nil {
		return nil, fmt.Errorf("parsing the SSH key %s: %w", from, err)
	}
	return signer, nil
}

func generateKey(path string) (ssh.Signer, error) {
	b, err := GenerateKeyPEM()
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating the SSH key's directory: %w", err)
	}
	// Written beside and renamed, so a crash never leaves half a key
	// that the next start would refuse.
	tmp := path + ".new"
	if err := writeSynced(tmp, b, 0o600); err != nil {
		return nil, fmt.Errorf("writing the SSH key: %w", err)
	}
	if err := os.WriteFile(path+".pub", []byte(authorizedKey(signer.PublicKey())+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("writing the SSH public key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("writing the SSH key: %w", err)
	}
	// The rename itself reaches the disk with the directory.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return signer, nil
}

// writeSynced writes a file and syncs it to disk before returning.
func writeSynced(path string, b []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func init() {
	// The remote is what --git-url says: no ~/.ssh/config of the
	// machine fluxd runs on may redirect it (host keys are checked
	// strictly either way).
	gitssh.DefaultSSHConfig = nil
}

// authorizedKey is k in authorized_keys form, with fluxd's comment.
func authorizedKey(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) + " " + keyComment
}

// deployKeyOf is the public half of signer.
func deployKeyOf(signer ssh.Signer) gitrepo.DeployKey {
	return gitrepo.DeployKey{PublicKey: authorizedKey(signer.PublicKey()), Fingerprint: ssh.FingerprintSHA256(signer.PublicKey())}
}

// ReadDeployKey loads (or, with cfg.GenerateSSHKey, creates) the key an
// SSH remote is reached with and returns its public half: what to add as
// a deploy key before fluxd can clone.
func ReadDeployKey(cfg Config) (gitrepo.DeployKey, error) {
	signer, err := cfg.signer()
	if err != nil {
		return gitrepo.DeployKey{}, err
	}
	return deployKeyOf(signer), nil
}

// signer is the key of cfg: SSHKey when set, else the file.
func (c Config) signer() (ssh.Signer, error) {
	if len(c.SSHKey) > 0 {
		return ParseKey(c.SSHKey, "from "+c.SSHKeySource)
	}
	return LoadKey(c.SSHKeyFile, c.GenerateSSHKey)
}

// sshAuth is go-git's public key authentication with a strict host key
// check and a bound on the connection's set-up.
type sshAuth struct {
	gitssh.PublicKeys
	timeout time.Duration
	hosts   *knownHosts
	// hostPort is the remote's address, for the host key algorithms.
	hostPort string
}

// ClientConfig is called by go-git for every connection: the known hosts
// file is read again then when it changed, so that a key added to it (or
// to the ConfigMap mounted there, which the kubelet swaps in place) is
// used without a restart.
func (a *sshAuth) ClientConfig() (*ssh.ClientConfig, error) {
	db, err := a.hosts.load()
	if err != nil {
		return nil, err
	}
	check := db.HostKeyCallback()
	file := a.hosts.path
	pk := a.PublicKeys
	pk.HostKeyCallback = func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := check(host, remote, key)
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			if len(ke.Want) == 0 {
				return &UnknownHostError{Host: host, Key: key, File: file}
			}
			return &HostKeyMismatchError{Host: host, Key: key, File: file, Line: ke.Want[0].Line}
		}
		return err
	}
	c, err := pk.ClientConfig()
	if c != nil {
		c.Timeout = a.timeout
		// Offer only the key types known for the host, so that a host
		// with several keys presents one the file lists.
		c.HostKeyAlgorithms = db.HostKeyAlgorithms(a.hostPort)
	}
	return c, err
}

// knownHosts is the known hosts file, parsed again when its contents
// change. Its contents are compared rather than its modification time: a
// ConfigMap mount changes by a symlink swap, and the file is small.
type knownHosts struct {
	path string

	mu   sync.Mutex
	data []byte
	db   *skeema.HostKeyDB
}

func (k *knownHosts) load() (*skeema.HostKeyDB, error) {
	b, err := os.ReadFile(k.path)
	if err != nil {
		return nil, fmt.Errorf("reading --git-ssh-known-hosts-file: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.db != nil && bytes.Equal(b, k.data) {
		return k.db, nil
	}
	// Parsed from the bytes read, not the path, so that a swap between
	// reading and parsing cannot mix two versions.
	tmp, err := os.CreateTemp("", "fluxd-known-hosts-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, werr
	}
	db, err := gitssh.NewKnownHostsDb(tmp.Name())
	if err != nil {
		return nil, fmt.Errorf("reading --git-ssh-known-hosts-file %s: %w", k.path, err)
	}
	k.data, k.db = b, db
	return db, nil
}

// newSSHAuth builds the authentication of an SSH remote: cfg's key, and
// only the host keys cfg.KnownHostsFile lists for the remote's host.
func newSSHAuth(cfg Config) (*sshAuth, gitrepo.DeployKey, error) {
	ep, err := transport.NewEndpoint(cfg.URL)
	if err != nil {
		return nil, gitrepo.DeployKey{}, err
	}
	signer, err := cfg.signer()
	if err != nil {
		return nil, gitrepo.DeployKey{}, err
	}
	hosts := &knownHosts{path: cfg.KnownHostsFile}
	if _, err := hosts.load(); err != nil {
		return nil, gitrepo.DeployKey{}, err
	}
	port := ep.Port
	if port <= 0 {
		port = gitssh.DefaultPort
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	a := &sshAuth{timeout: cfg.Timeout, hosts: hosts, hostPort: net.JoinHostPort(ep.Host, strconv.Itoa(port))}
	if a.timeout <= 0 {
		a.timeout = DefaultTimeout
	}
	a.User, a.Signer = user, signer
	return a, deployKeyOf(signer), nil
}

// sshError explains an SSH remote's refusal, or returns nil when err is
// not one.
func (r *Repo) sshError(err error) (msg error, help string) {
	var unknown *UnknownHostError
	var mismatch *HostKeyMismatchError
	switch {
	case errors.As(err, &unknown):
		return unknown, unknownHostHelp(unknown)
	case errors.As(err, &mismatch):
		return mismatch, "The host's key changed, or something between fluxd and the host answers in its place. Ask the host's operator whether the key changed before replacing that line."
	case r.deployKey != nil && strings.Contains(err.Error(), "unable to authenticate"):
		host := ""
		if ep, perr := transport.NewEndpoint(r.cfg.URL); perr == nil {
			host = ep.Host
		}
		help := "Add the public key above to the repository as a deploy key (GitHub: Settings → Deploy keys, with \"Allow write access\"; GitLab: Settings → Repository → Deploy keys, with write access), or to the authorized_keys of the remote's git user. 'fluxctl identity' prints it while fluxd runs"
		if r.cfg.SSHKeySource != "" && len(r.cfg.SSHKey) > 0 {
			help += fmt.Sprintf("; it is kept in %s", r.cfg.SSHKeySource)
		} else if r.cfg.GenerateSSHKey {
			help += fmt.Sprintf("; fluxd generated it and keeps it in %s (public half: %s.pub)", r.cfg.SSHKeyFile, r.cfg.SSHKeyFile)
		}
		return &KeyRefusedError{Host: host, Key: *r.deployKey, Err: err}, help + "."
	}
	return nil, ""
}

// unknownHostHelp says how to add an unknown host's key: to the file, or,
// when the file is a ConfigMap's mount (read-only, with the kubelet's
// ..data link beside it), to the ConfigMap. Either way fluxd reads the
// file again on its next connection.
func unknownHostHelp(e *UnknownHostError) string {
	help := "fluxd connects only to hosts whose key --git-ssh-known-hosts-file lists. Check the fingerprint above out of band (the git host's documentation or its operator), then add the key"
	dir, base := filepath.Split(e.File)
	if _, err := os.Lstat(filepath.Join(dir, "..data")); err == nil {
		return help + fmt.Sprintf(" to the ConfigMap mounted at %s (fluxd-known-hosts in the install; the file is read-only in the pod), under the key %s:\n  kubectl -n NAMESPACE get configmap fluxd-known-hosts -o jsonpath='{.data.%s}' > %s\n  %s >> %s\n  kubectl -n NAMESPACE create configmap fluxd-known-hosts --from-file=%s --dry-run=client -o yaml | kubectl replace -f -\nThe kubelet updates the mounted file within a minute or so; fluxd reads it again on its next attempt, with no restart.", dir, base, base, base, keyscan(e.Host), base, base)
	}
	return help + fmt.Sprintf(":\n  %s >> %s\nfluxd reads the file again on its next attempt, with no restart.", keyscan(e.Host), e.File)
}

// keyscan is the ssh-keyscan command that prints host:port's keys.
func keyscan(hostPort string) string {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		return "ssh-keyscan " + hostPort
	}
	if port == strconv.Itoa(gitssh.DefaultPort) {
		return "ssh-keyscan " + host
	}
	return "ssh-keyscan -p " + port + " " + host
}
