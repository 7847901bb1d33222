package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/orderedjson"
)

// Defaults naming extensions_config.json (the variables are in env.go).
const (
	DefaultExtensionsFile = "extensions_config.json"
	extensionsFlagName    = "--extensions-config"
)

// Extensions is a loaded extensions_config.json.
type Extensions struct {
	// Path is the file it was read from ("" when no file was found).
	Path string
	// Servers are the valid server entries in file order, enabled or not.
	Servers []*Server
	// Interceptors is mcpInterceptors (a single string becomes one entry).
	Interceptors []string
	// Raw holds every top-level key as written in the file (unexpanded).
	Raw map[string]json.RawMessage
	// Problems lists skipped servers and ignored blocks, with file, server and field.
	Problems []Problem
}

// Enabled returns the enabled servers in file order.
func (e *Extensions) Enabled() []*Server {
	var out []*Server
	for _, s := range e.Servers {
		if s.Enabled {
			out = append(out, s)
		}
	}
	return out
}

// Server returns the named server, or nil.
func (e *Extensions) Server(name string) *Server {
	for _, s := range e.Servers {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// FindExtensionsPath picks the extensions_config.json to load: flag, then
// $MCPBUS_EXTENSIONS_CONFIG, then $DEER_FLOW_EXTENSIONS_CONFIG_PATH, then
// ./extensions_config.json. explicit is false only for the last, whose
// absence is not an error.
func FindExtensionsPath(flag string, env Env) (path string, explicit bool) {
	if flag != "" {
		return flag, true
	}
	for _, name := range []string{EnvExtensionsConfig, EnvDeerFlowExtensionsPath} {
		if v := env.Get(name); v != "" {
			return v, true
		}
	}
	return DefaultExtensionsFile, false
}

// pathSource says where an explicit path came from, for error messages.
func pathSource(path, flagName string, env Env, names ...string) string {
	for _, name := range names {
		if env.Get(name) == path {
			return "set by environment variable " + name
		}
	}
	return "given by " + flagName
}

// LoadExtensions reads and parses an extensions_config.json. An explicit
// path that does not exist is an error naming the path and where it came
// from; a missing non-explicit file gives an empty *Extensions (Path "").
func LoadExtensions(path string, explicit bool, env Env) (*Extensions, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if explicit {
				return nil, fmt.Errorf("extensions config file %s (%s) not found: %w", path,
					pathSource(path, extensionsFlagName, env, EnvExtensionsConfig, EnvDeerFlowExtensionsPath), err)
			}
			return &Extensions{Raw: map[string]json.RawMessage{}}, nil
		}
		return nil, fmt.Errorf("failed to load extensions config from %s: %w", path, err)
	}
	return ParseExtensions(path, data)
}

// FileError is an extensions file that cannot be parsed at all. Problem
// says what is wrong with the document, without the file's path: what the
// config API shows the author of the document.
type FileError struct {
	Path    string
	Problem string
	Err     error
}

func (e *FileError) Error() string { return "extensions config file at " + e.Path + ": " + e.Problem }
func (e *FileError) Unwrap() error { return e.Err }

// ParseExtensions parses the bytes of an extensions_config.json read from
// path (used in messages and as Extensions.Path). Servers keep file order.
// A server with a bad entry is skipped with Problems; only a file that is not
// a JSON object (or whose mcpServers is not an object) is an error.
// Whole-string "$VAR" values are expanded in this process's environment.
func ParseExtensions(path string, data []byte) (*Extensions, error) {
	return parseExtensions(path, data, expandString)
}

// ParseExtensionsAsWritten parses like ParseExtensions but judges "$VAR"
// values as written: each stands in as "VAR", so the verdict does not depend
// on this host's environment (every service expands the file in its own),
// and the value rules (URLs, header names) skip placeholders as they do
// when running. Use it to validate a candidate file, never to run one.
func ParseExtensionsAsWritten(path string, data []byte) (*Extensions, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	return parseExtensions(path, data, func(s string) string {
		if len(s) > 1 && IsPlaceholder(s) {
			return s[1:]
		}
		return s
	})
}

func parseExtensions(path string, data []byte, expand func(string) string) (*Extensions, error) {
	var probe any
	if err := json.Unmarshal(data, &probe); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := position(data, syn.Offset)
			return nil, &FileError{Path: path, Problem: fmt.Sprintf("not valid JSON: line %d, column %d: %v", line, col, err), Err: err}
		}
		return nil, &FileError{Path: path, Problem: fmt.Sprintf("not valid JSON: %v", err), Err: err}
	}
	top, ok := probe.(map[string]any)
	if !ok {
		return nil, &FileError{Path: path, Problem: "the top level must be a JSON object, got " + jsonKind(probe)}
	}
	ext := &Extensions{Path: path}
	if err := json.Unmarshal(data, &ext.Raw); err != nil {
		return nil, &FileError{Path: path, Problem: err.Error(), Err: err}
	}
	ext.topKeys()
	if v, present := top["mcpServers"]; present {
		if _, ok := v.(map[string]any); !ok {
			return nil, &FileError{Path: path, Problem: "mcpServers must be a JSON object, got " + jsonKind(v)}
		}
		if err := ext.parseServers(ext.Raw["mcpServers"], expand); err != nil {
			return nil, &FileError{Path: path, Problem: "mcpServers: " + err.Error(), Err: err}
		}
	}
	if raw, present := ext.Raw["mcpInterceptors"]; present {
		ext.parseInterceptors(raw, expand)
	}
	return ext, nil
}

// parseServers decodes mcpServers in file order. A name written twice keeps
// its first position and its last definition (like Python's json), with a
// warning.
func (e *Extensions) parseServers(raw json.RawMessage, expand func(string) string) error {
	names, vals, err := orderedjson.Members(raw)
	if err != nil {
		return err
	}
	index := map[string]int{}
	var order []string
	entries := map[string]json.RawMessage{}
	for i, name := range names {
		if _, dup := index[name]; dup {
			e.Problems = append(e.Problems, Problem{File: e.Path, Server: name, Message: "is defined more than once; the last definition is used", Severity: SeverityWarning})
		} else {
			index[name] = len(order)
			order = append(order, name)
		}
		entries[name] = vals[i]
	}
	for _, name := range order {
		s, probs := parseServer(e.Path, name, entries[name], expand)
		e.Problems = append(e.Problems, probs...)
		if s != nil {
			e.Servers = append(e.Servers, s)
		}
	}
	return nil
}

// parseInterceptors reads mcpInterceptors: a list of strings, or a single
// string as a one-entry list. Anything else is ignored with a warning. An
// entry that names no interceptor compiled into mcpbus (and is not
// "nats:<subject>") is an error; running services skip it.
func (e *Extensions) parseInterceptors(raw json.RawMessage, expand func(string) string) {
	v, err := decodeJSON(raw)
	if err != nil {
		e.warn("mcpInterceptors", "could not be decoded; skipping")
		return
	}
	defer e.checkInterceptorNames()
	switch x := expandWith(v, expand).(type) {
	case nil:
	case string:
		if x == "" {
			e.warn("mcpInterceptors", "is an empty string; skipping")
			return
		}
		e.Interceptors = []string{x}
	case []any:
		for i, item := range x {
			s, ok := item.(string)
			field := fmt.Sprintf("mcpInterceptors[%d]", i)
			switch {
			case !ok:
				e.warn(field, fmt.Sprintf("must be a string, got %s; skipping", jsonKind(item)))
			case s == "":
				e.warn(field, "is an empty string; skipping")
			default:
				e.Interceptors = append(e.Interceptors, s)
			}
		}
	default:
		e.warn("mcpInterceptors", fmt.Sprintf("must be a list of strings, got %s; skipping", jsonKind(x)))
	}
}

// topKeys refuses a top-level key that looks like a misspelt known key
// (did you mean …); other top-level keys (skills, a host application's own
// sections) are kept verbatim.
func (e *Extensions) topKeys() {
	for _, k := range sortedKeys(e.Raw) {
		if knownTopKeys[k] {
			continue
		}
		if s := suggest(k, sortedKeys(knownTopKeys)); s != "" {
			e.Problems = append(e.Problems, Problem{File: e.Path, Field: k, Message: unknownKeyMessage(k, s), Severity: SeverityError})
		}
	}
}

// knownTopKeys are the top-level keys of extensions_config.json.
var knownTopKeys = map[string]bool{"mcpServers": true, "mcpInterceptors": true, "skills": true}

// checkInterceptorNames refuses entries naming no built-in interceptor.
func (e *Extensions) checkInterceptorNames() {
	for i, entry := range e.Interceptors {
		entry = strings.TrimSpace(entry)
		if subject, ok := strings.CutPrefix(entry, InterceptorNATSPrefix); ok {
			if strings.TrimSpace(subject) == "" {
				e.Problems = append(e.Problems, Problem{File: e.Path, Field: fmt.Sprintf("mcpInterceptors[%d]", i),
					Message: "'nats:' must be followed by a NATS subject", Severity: SeverityError})
			}
			continue
		}
		name, _, _ := strings.Cut(entry, ":")
		if slices.Contains(BuiltinInterceptors, name) {
			continue
		}
		msg := fmt.Sprintf("no interceptor named '%s' is compiled into mcpbus (known: %s; or nats:<subject> for an external one)", name, strings.Join(BuiltinInterceptors, ", "))
		if s := suggest(name, BuiltinInterceptors); s != "" {
			msg += "; did you mean '" + s + "'?"
		}
		e.Problems = append(e.Problems, Problem{File: e.Path, Field: fmt.Sprintf("mcpInterceptors[%d]", i), Message: msg, Severity: SeverityError})
	}
}

// BuiltinInterceptors are the interceptor names compiled into mcpbus
// (pkg/interceptors registers exactly these); InterceptorNATSPrefix starts
// an external interceptor entry.
var BuiltinInterceptors = []string{"request_logger", "set_header"}

// InterceptorNATSPrefix starts an mcpInterceptors entry naming an external
// interceptor by its NATS subject.
const InterceptorNATSPrefix = "nats:"

func (e *Extensions) warn(field, msg string) {
	e.Problems = append(e.Problems, Problem{File: e.Path, Field: field, Message: msg, Severity: SeverityWarning})
}

// InterceptorsFingerprint is the hex SHA-256 of the canonical JSON of the
// expanded interceptor list; equal values mean an unchanged chain.
func (e *Extensions) InterceptorsFingerprint() string {
	list := e.Interceptors
	if list == nil {
		list = []string{}
	}
	return fingerprintOf(list)
}
