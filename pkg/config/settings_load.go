package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mcpbus/mcpbus/pkg/pinning"
)

// Environment variables read by the settings loader.
//
// File lookup: MCPBUS_CONFIG names config.yaml (after --config).
//
// Overrides, applied after the file (and after $VAR expansion) when set
// and non-empty:
//   - MCPBUS_NATS_URL     replaces nats.url
//   - MCPBUS_NATS_NAMESPACE replaces nats.namespace
//   - MCPBUS_DATABASE_URL replaces database.url; a backend of "memory"
//     becomes "postgres" (sqlite and postgres are kept)
//   - MCPBUS_API_LISTEN   replaces api.listen
const (
	DefaultSettingsFile = "config.yaml"
	settingsFlagName    = "--config"
)

// DefaultSettings returns config.yaml's defaults.
func DefaultSettings() Settings {
	return Settings{
		NATS:     NATSSettings{URL: "nats://127.0.0.1:4222", Replicas: ReplicasAuto},
		Database: DatabaseSettings{Backend: BackendMemory, Path: ".mcpbus/mcpbus.db", AutoMigrate: true},
		MCPTasks: MCPTasks{
			Enabled:                          false,
			PollIntervalSeconds:              5,
			LeaseSeconds:                     120,
			MaxConcurrentPolls:               8,
			MaxPollBackoffSeconds:            300,
			InputRequiredPollIntervalSeconds: 60,
			TrackingDegradedAfterErrors:      3,
			MaxResultBytes:                   65536,
			ResultPreviewMaxChars:            2000,
		},
		ToolSearch: ToolSearch{Enabled: false, AutoPromoteTopK: 3},
		Discovery:  DiscoverySettings{RetryInitialSeconds: 5, RetryMaxSeconds: 300},
		Pinning:    PinningSettings{Default: string(pinning.Off), Personal: string(pinning.Log)},
		Guardrails: Guardrails{Enabled: false, FailClosed: true},
		Deployment: Deployment{MultiInstance: false},
		API: APISettings{Listen: "127.0.0.1:8001", MaxBodyBytes: 1 << 20, ReadTimeoutSeconds: 30,
			ReadHeaderTimeoutSeconds: 10, IdleTimeoutSeconds: 120, MaxHeaderBytes: 64 << 10,
			MCP: MCPEndpoint{PageSize: 100, SessionIdleSeconds: 1800, MaxStreamsPerUser: 8, CatalogTTLSeconds: 60,
				MaxSessionsPerUser: 64, SessionBucketMaxBytes: 256 << 20},
			Console: ConsoleSettings{SessionSeconds: 8 * 3600, SignInFailures: 10, SignInWindowSeconds: 900}},
		PersonalConnections: PersonalConnections{MaxPerUser: 20, Stdio: false, Path: DefaultPersonalPath, UIDRange: DefaultUIDRange,
			MaxSessionInitTimeoutSeconds: DefaultMaxSessionInitTimeoutSeconds,
			MaxToolCallTimeoutSeconds:    DefaultMaxToolCallTimeoutSeconds,
		},
		Workspace: Workspace{Root: ".mcpbus/workspace"},
		StdioPool: StdioPool{MaxSessions: 256, MaxSessionsPerUser: 32},
		Log:       LogSettings{Level: "info", Format: "text"},
		Shutdown:  Shutdown{DrainSeconds: 30},
		Observability: ObservabilitySettings{Tracing: TracingSettings{
			Protocol: TracingProtocolHTTP, SampleRatio: 1, ServiceNamePrefix: "mcpbus-"}},
		Audit: DefaultAudit(),
	}
}

// FindSettingsPath picks config.yaml: flag, then $MCPBUS_CONFIG, then
// ./config.yaml (explicit false: its absence means defaults).
func FindSettingsPath(flag string, env Env) (path string, explicit bool) {
	if flag != "" {
		return flag, true
	}
	if v := env.Get(EnvConfig); v != "" {
		return v, true
	}
	return DefaultSettingsFile, false
}

// LoadSettings reads config.yaml onto DefaultSettings, expands whole-string
// $VAR values, applies the environment overrides and validates. A missing
// non-explicit file gives the defaults. Unknown keys, YAML errors and
// validation errors fail; warnings are kept in Settings.Problems.
func LoadSettings(path string, explicit bool, env Env) (*Settings, error) {
	s, err := readSettings(path, explicit, env)
	if err != nil {
		return nil, err
	}
	if err := ErrorOf(s.Validate()); err != nil {
		return nil, err
	}
	s.applyVirtualPinning()
	return s, nil
}

// applyVirtualPinning lays each virtual server's pinning policy over the
// servers it lists (PinningSettings.RaiseFloor: the stricter of the
// server's own and the set's applies, to every caller of that server).
func (s *Settings) applyVirtualPinning() {
	for _, vs := range s.VirtualServers {
		p, err := pinning.ParsePolicy(vs.Pinning)
		if vs.Pinning == "" || err != nil {
			continue // "" sets no floor; a bad value failed Validate
		}
		for _, srv := range vs.Servers {
			s.Pinning.RaiseFloor(srv, p)
		}
	}
}

// readSettings is LoadSettings without validation.
func readSettings(path string, explicit bool, env Env) (*Settings, error) {
	s := DefaultSettings()
	s.Database.Backend = "" // set below: the file's, else the default
	s.NATS.URL = ""         // likewise
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := decodeSettings(path, data, &s); err != nil {
			return nil, err
		}
		s.Path = path
	case errors.Is(err, fs.ErrNotExist) && !explicit:
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("config file %s (%s) not found: %w", path, pathSource(path, settingsFlagName, env, EnvConfig), err)
	default:
		return nil, fmt.Errorf("failed to load config from %s: %w", path, err)
	}
	expandStrings(reflect.ValueOf(&s).Elem())
	s.Database.BackendSet = s.Database.Backend != ""
	s.NATS.URLSet = s.NATS.URL != ""
	s.NATS.URL = cmp.Or(s.NATS.URL, DefaultSettings().NATS.URL)
	s.Database.Backend = cmp.Or(s.Database.Backend, DefaultSettings().Database.Backend)
	applyEnvOverrides(&s, env)
	s.CredentialsKeySet = env.CredentialsKey() != ""
	return &s, nil
}

// decodeSettings decodes YAML onto s. Unknown keys (with a did-you-mean)
// and values of the wrong kind are reported all at once, in the file's
// terms: line, key path and the expected kind, never a Go type name.
func decodeSettings(path string, data []byte, s *Settings) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return fmt.Errorf("config file %s is not valid YAML: %w", path, err)
	}
	if root.Kind == 0 { // empty document: defaults
		return nil
	}
	var unknown []string
	unknownKeys(&root, reflect.TypeOf(*s), "", &unknown)
	if len(unknown) > 0 {
		return fmt.Errorf("config file %s: %s", path, strings.Join(unknown, "; "))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(s); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

// unknownKeys walks a YAML node against the Go type it decodes into and
// lists mapping keys that have no field, as "line N: unknown key a.b"
// (with a did-you-mean when one is close), and values of the wrong kind,
// as "line N: a.b: expected a list, got a string".
func unknownKeys(n *yaml.Node, t reflect.Type, path string, out *[]string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			unknownKeys(c, t, path, out)
		}
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if want := kindMismatch(n, t); want != "" {
		*out = append(*out, fmt.Sprintf("line %d: %s: expected %s, got %s", n.Line, cmp.Or(path, "the document"), want, yamlKind(n)))
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && (k.Tag == "!!merge" || k.Tag == "") {
				unknownKeys(v, t, path, out)
				if v.Kind == yaml.SequenceNode {
					for _, c := range v.Content {
						unknownKeys(c, t, path, out)
					}
				}
				continue
			}
			key := joinKey(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				msg := fmt.Sprintf("line %d: unknown key %q", k.Line, key)
				if s := suggest(k.Value, sortedKeys(fields)); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", joinKey(path, s))
				}
				*out = append(*out, msg)
				continue
			}
			unknownKeys(v, ft, key, out)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			unknownKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			unknownKeys(n.Content[i+1], t.Elem(), joinKey(path, n.Content[i].Value), out)
		}
	}
}

// kindMismatch returns the kind of YAML value t needs ("a list", "a
// mapping of keys to values", "true or false", "a whole number", "a
// number", "a text value") when n is not one, else "". Null is always
// accepted (the default stays), and so is anything for a free-form value.
func kindMismatch(n *yaml.Node, t reflect.Type) string {
	if n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return ""
	}
	if reflect.PointerTo(t).Implements(yamlUnmarshaler) || t.Implements(yamlUnmarshaler) {
		return ""
	}
	var want string
	ok := false
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		want, ok = "a mapping of keys to values", n.Kind == yaml.MappingNode
	case reflect.Slice, reflect.Array:
		want, ok = "a list", n.Kind == yaml.SequenceNode
	case reflect.Bool:
		want, ok = "true or false", n.Kind == yaml.ScalarNode && n.Tag == "!!bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want, ok = "a whole number", n.Kind == yaml.ScalarNode && n.Tag == "!!int"
	case reflect.Float32, reflect.Float64:
		want, ok = "a number", n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float")
	case reflect.String:
		want, ok = "a text value", n.Kind == yaml.ScalarNode
	default:
		return ""
	}
	if ok {
		return ""
	}
	return want
}

var yamlUnmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// yamlKind names what a YAML node holds, in the file's terms.
func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.Tag {
	case "!!bool":
		return "true/false"
	case "!!int":
		return "a whole number"
	case "!!float":
		return "a number"
	case "!!str":
		return "a text value"
	}
	return "a value"
}

// yamlFields maps YAML keys to field types the way yaml.v3 does.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// expandStrings applies whole-string $VAR expansion to every string reached
// from v (struct fields decoded from YAML, slices, and free-form maps).
func expandStrings(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(expandString(v.String()))
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < v.NumField(); i++ {
			if f := t.Field(i); f.IsExported() && f.Tag.Get("yaml") != "-" {
				expandStrings(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			expandStrings(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			e := v.MapIndex(k)
			nv := reflect.ValueOf(expandEnv(e.Interface()))
			if !nv.IsValid() {
				continue // nil stays nil
			}
			if nv.Type().AssignableTo(v.Type().Elem()) {
				v.SetMapIndex(k, nv)
			}
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			expandStrings(v.Elem())
		}
	}
}

// applyEnvOverrides applies MCPBUS_NATS_URL, MCPBUS_NATS_NAMESPACE,
// MCPBUS_DATABASE_URL and MCPBUS_API_LISTEN (see the constants above).
func applyEnvOverrides(s *Settings, env Env) {
	if v := env.Get(EnvNATSURL); v != "" {
		s.NATS.URL = v
	}
	if v := env.Get(EnvNamespace); v != "" {
		s.NATS.Namespace = v
	}
	if v := env.Get(EnvDatabaseURL); v != "" {
		s.Database.URL = v
		if s.Database.Backend == BackendMemory {
			s.Database.Backend = BackendPostgres
		}
	}
	if v := env.Get(EnvAPIListen); v != "" {
		s.API.Listen = v
	}
}

// settingsLabel names the settings source for problems.
func settingsLabel(s *Settings) string {
	if s.Path == "" {
		return "config.yaml (defaults)"
	}
	return s.Path
}
