package oci

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"go.yaml.in/yaml/v3"
)

// credentialsFile is the --registry-credentials format, per registry host:
//
//	registries:
//	  ghcr.io:
//	    username: bot
//	    password: ghp_...          # or passwordFile: /var/run/secrets/ghcr
//	  registry.example:5000:
//	    token: ...                 # a registry (bearer) token
type credentialsFile struct {
	Registries map[string]struct {
		Username     string `yaml:"username"`
		Password     string `yaml:"password"`
		PasswordFile string `yaml:"passwordFile"`
		Token        string `yaml:"token"`
	} `yaml:"registries"`
}

// CredentialsFile is a SecretSource over a per-registry credentials file
// (YAML or JSON, see credentialsFile). It is read again whenever the
// keychain's cache expires or a registry answers 401, so a rotated
// password is picked up without a restart.
func CredentialsFile(path string) SecretSource {
	return func(context.Context) ([]Credentials, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading --registry-credentials: %w", err)
		}
		cfg, err := parseCredentials(path, b)
		if err != nil {
			return nil, err
		}
		return []Credentials{{Source: "--registry-credentials " + path, DockerConfig: cfg, Global: true}}, nil
	}
}

// parseCredentials turns the file into a docker config.json document.
func parseCredentials(path string, b []byte) ([]byte, error) {
	var f credentialsFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		// yaml's own message quotes the offending value, which here may be
		// a password: say only where the file is wrong.
		return nil, fmt.Errorf("--registry-credentials %s: not the expected YAML%s: expected registries: {HOST: {username, password | passwordFile | token}}", path, yamlLines(err))
	}
	type auth struct {
		Auth          string `json:"auth,omitempty"`
		RegistryToken string `json:"registrytoken,omitempty"`
	}
	auths := map[string]auth{}
	for host, c := range f.Registries {
		if err := checkRegistryHost(host); err != nil {
			return nil, fmt.Errorf("--registry-credentials %s: %w", path, err)
		}
		pw := c.Password
		if c.PasswordFile != "" {
			raw, err := os.ReadFile(c.PasswordFile)
			if err != nil {
				return nil, fmt.Errorf("--registry-credentials %s: registry %s: reading its passwordFile: %w", path, host, err)
			}
			pw = strings.TrimSpace(string(raw))
		}
		switch {
		case c.Token != "":
			auths[host] = auth{RegistryToken: c.Token}
		case c.Username != "" && pw != "":
			auths[host] = auth{Auth: base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + pw))}
		default:
			return nil, fmt.Errorf("--registry-credentials %s: registry %s has neither a username with a password (or passwordFile) nor a token", path, host)
		}
	}
	return json.Marshal(map[string]any{"auths": auths})
}

// yamlLines returns " (line N, line M: field F not found, ...)" from a
// yaml error, without the values it quotes.
func yamlLines(err error) string {
	var lines []string
	for _, m := range yamlLine.FindAllString(err.Error(), -1) {
		lines = append(lines, m)
	}
	if len(lines) == 0 {
		return ""
	}
	return " (" + strings.Join(lines, ", ") + ")"
}

// yamlLine keeps the line numbers and the unknown field names (keys, not
// values) of a yaml error.
var yamlLine = regexp.MustCompile(`line \d+(: field \S+ not found)?`)

// CheckDockerConfig checks credentials in config.json form (a
// dockerconfigjson Secret's) as fluxd starts: they parse, and name at
// least one registry, each a valid registry host. An operator's named
// credentials that are malformed fail fluxd's start rather than being
// passed over at every scan.
func CheckDockerConfig(source string, b []byte) error {
	cf, err := parseDockerConfig(source, b)
	if err != nil {
		return err
	}
	if len(cf.AuthConfigs) == 0 {
		return fmt.Errorf("%s holds no registry credentials: expected {\"auths\": {\"HOST\": {\"auth\": \"BASE64(user:password)\"}}}", source)
	}
	for host, ac := range cf.AuthConfigs {
		if err := checkRegistryHost(host); err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		if ac.Username == "" && ac.Password == "" && ac.Auth == "" && ac.IdentityToken == "" && ac.RegistryToken == "" {
			return fmt.Errorf("%s: registry %s has no username, password, auth or token", source, host)
		}
	}
	return nil
}

// checkRegistryHost checks a credentials entry's key: a registry host
// (with a port, optionally), or a URL of one as docker writes for Docker
// Hub (https://index.docker.io/v1/).
func checkRegistryHost(host string) error {
	h := host
	if u, err := url.Parse(host); err == nil && u.Scheme != "" && u.Host != "" {
		switch strings.TrimSuffix(u.Path, "/") {
		case "", "/v1", "/v2":
			h = u.Host
		}
	}
	if _, err := name.NewRegistry(h, name.StrictValidation); err != nil || h == "" || strings.ContainsAny(h, " /") {
		return fmt.Errorf("%q is not a registry host (write it as registry.example or registry.example:5000)", host)
	}
	return nil
}
