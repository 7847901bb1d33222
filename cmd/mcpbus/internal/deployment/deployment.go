// Package deployment finds the mcpbus deployment an operator command (the
// CLI verbs and `mcpbus stdio`) talks to: a NATS URL, how to authenticate
// to it and the deployment's namespace. It never falls back to a default
// URL: when nothing names a deployment, Find fails naming the flags and
// variables that would.
//
// A dev directory is the state directory `mcpbus dev` keeps (.mcpbus/,
// holding nats.url, nats.token and nats.namespace while it runs) or the
// directory containing it (the checkout `mcpbus dev` runs in).
package deployment

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/redact"
)

// The state directory of `mcpbus dev` and the files it writes there while
// it runs (removed when it stops).
const (
	StateDir      = ".mcpbus"
	URLFile       = "nats.url"
	TokenFile     = "nats.token"
	NamespaceFile = "nats.namespace"
)

// EnvTokenFile names the NATS token file when --nats-token-file is not given.
const EnvTokenFile = "MCPBUS_NATS_TOKEN_FILE"

// Options are what the operator gave: flags, the environment and the
// working directory.
type Options struct {
	// NATSURL is --nats-url.
	NATSURL string
	// TokenFile is --nats-token-file (default $MCPBUS_NATS_TOKEN_FILE).
	TokenFile string
	// Dir is --dir: a dev directory.
	Dir string
	// ConfigPath is --config.
	ConfigPath string
	// Namespace is --namespace.
	Namespace string
	Env       config.Env
	// WorkDir is where the upward search for .mcpbus/ starts.
	WorkDir string
}

// Deployment is where a command connects.
type Deployment struct {
	URL  string
	Auth bus.Auth
	// Namespace is the deployment's nats.namespace ("" = none).
	Namespace string
	// Source says how the deployment was found, for the operator.
	Source string
}

// String describes d in one line without secrets.
func (d Deployment) String() string {
	ns := cmp.Or(d.Namespace, "(none)")
	return fmt.Sprintf("NATS %s, namespace %s (%s)", redact.URL(d.URL), ns, d.Source)
}

// ErrNotFound is returned when nothing names a deployment.
var ErrNotFound = errors.New("no mcpbus deployment found")

// Find picks the deployment, first match wins: --dir; --nats-url;
// $MCPBUS_NATS_URL; a running dev process's .mcpbus/ found upward from
// o.WorkDir; nats.url set in config.yaml (--config, $MCPBUS_CONFIG or
// ./config.yaml). A URL given by flag, environment or config.yaml
// authenticates with --nats-token-file (or $MCPBUS_NATS_TOKEN_FILE), else
// config.yaml's nats.token_file and nats.credentials_file; a dev directory
// with its own nats.token (as does the URL of the dev process found upward).
func Find(o Options) (Deployment, error) {
	if o.Dir != "" && o.NATSURL != "" {
		return Deployment{}, errors.New("--dir and --nats-url name two deployments: give one")
	}
	o.TokenFile = cmp.Or(o.TokenFile, o.Env.Get(EnvTokenFile))
	var (
		d   Deployment
		err error
	)
	switch {
	case o.Dir != "":
		d, err = fromDir(o, o.Dir, "--dir")
	case o.NATSURL != "":
		d, err = fromURL(o, o.NATSURL, "--nats-url")
	case o.Env.Get(config.EnvNATSURL) != "":
		d, err = fromURL(o, o.Env.Get(config.EnvNATSURL), "$"+config.EnvNATSURL)
	default:
		d, err = search(o)
	}
	if err != nil {
		return Deployment{}, err
	}
	if ns := cmp.Or(o.Namespace, o.Env.Get(config.EnvNamespace)); ns != "" {
		d.Namespace = ns
	}
	return d, nil
}

// search is Find without a flag or variable naming the deployment.
func search(o Options) (Deployment, error) {
	state, stale := findUp(o.WorkDir)
	if state != "" {
		return fromState(o, state, "found upward from "+o.WorkDir)
	}
	s, err := settings(o)
	if err != nil {
		return Deployment{}, err
	}
	if s.NATS.URLSet {
		return fromURL(o, s.NATS.URL, "nats.url of "+s.Path)
	}
	hint := ""
	if stale != "" {
		hint = fmt.Sprintf(" (%s has no %s: mcpbus dev is not running there)", stale, URLFile)
	}
	return Deployment{}, fmt.Errorf("%w from %s: no running `mcpbus dev` in a %s/ here or above%s and no NATS URL given; "+
		"set --dir to the dev checkout (or its %s/), or --nats-url with --nats-token-file (or $%s and $%s), "+
		"or --config naming a config.yaml that sets nats.url",
		ErrNotFound, o.WorkDir, StateDir, hint, StateDir, config.EnvNATSURL, EnvTokenFile)
}

// findUp returns the nearest .mcpbus/ at or above dir that holds a running
// dev process's nats.url, and the nearest one without it (stale).
func findUp(dir string) (state, stale string) {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		s := filepath.Join(d, StateDir)
		if fi, err := os.Stat(s); err == nil && fi.IsDir() {
			if _, err := os.Stat(filepath.Join(s, URLFile)); err == nil {
				return s, stale
			}
			stale = cmp.Or(stale, s)
		}
		if filepath.Dir(d) == d {
			return "", stale
		}
	}
}

// fromDir is the deployment of the dev directory dir, given by flag.
func fromDir(o Options, dir, flag string) (Deployment, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Deployment{}, fmt.Errorf("%s %s: %w", flag, dir, err)
	}
	state := abs
	if filepath.Base(abs) != StateDir {
		if fi, err := os.Stat(filepath.Join(abs, StateDir)); err == nil && fi.IsDir() {
			state = filepath.Join(abs, StateDir)
		}
	}
	if _, err := os.Stat(filepath.Join(state, URLFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Deployment{}, fmt.Errorf("%s %s: no running `mcpbus dev` there (no %s in %s); start it there, or give the checkout it runs in or its %s/",
				flag, dir, URLFile, state, StateDir)
		}
		return Deployment{}, fmt.Errorf("%s %s: %w", flag, dir, err)
	}
	return fromState(o, state, flag+" "+state)
}

// fromState reads what a running dev process wrote to its state directory.
func fromState(o Options, state, source string) (Deployment, error) {
	url, err := readLine(filepath.Join(state, URLFile))
	if err != nil {
		return Deployment{}, err
	}
	if url == "" {
		return Deployment{}, fmt.Errorf("%s is empty", filepath.Join(state, URLFile))
	}
	ns, err := readLine(filepath.Join(state, NamespaceFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Deployment{}, err
	}
	return Deployment{URL: url, Auth: bus.Auth{TokenFile: cmp.Or(o.TokenFile, filepath.Join(state, TokenFile))},
		Namespace: ns, Source: "dev directory " + source}, nil
}

// fromURL is a deployment named by URL. When it is the URL of the running
// dev process found upward from the working directory, and no token file
// is given, it is that dev directory's deployment; otherwise its
// authentication and namespace come from the token file given, else from
// config.yaml.
func fromURL(o Options, url, source string) (Deployment, error) {
	if state, _ := findUp(o.WorkDir); state != "" && o.TokenFile == "" {
		if devURL, err := readLine(filepath.Join(state, URLFile)); err == nil && devURL == url {
			return fromState(o, state, source+" = "+state)
		}
	}
	s, err := settings(o)
	if err != nil {
		return Deployment{}, err
	}
	tls := bus.TLS{CAFile: s.NATS.TLS.CAFile, CertFile: s.NATS.TLS.CertFile, KeyFile: s.NATS.TLS.KeyFile}
	d := Deployment{URL: url, Namespace: s.NATS.Namespace, Source: source,
		Auth: bus.Auth{CredentialsFile: s.NATS.CredentialsFile, TokenFile: s.NATS.TokenFile, TLS: tls}}
	if o.TokenFile != "" {
		d.Auth = bus.Auth{TokenFile: o.TokenFile, TLS: tls}
	}
	return d, nil
}

// settings reads config.yaml (with the environment overrides).
func settings(o Options) (*config.Settings, error) {
	p, explicit := config.FindSettingsPath(o.ConfigPath, o.Env)
	if !explicit && !filepath.IsAbs(p) {
		p = filepath.Join(o.WorkDir, p)
	}
	return config.LoadSettings(p, explicit, o.Env)
}

func readLine(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}
