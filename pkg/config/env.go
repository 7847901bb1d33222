package config

import (
	"os"
	"strings"
)

// The environment variables mcpbus reads. They are read here only: a main
// calls ReadEnv once and passes the Env down (bootstrap.Runtime.Env).
const (
	// EnvConfig names config.yaml (after --config).
	EnvConfig = "MCPBUS_CONFIG"
	// EnvExtensionsConfig and EnvDeerFlowExtensionsPath name
	// extensions_config.json (after --extensions-config), in this order.
	EnvExtensionsConfig       = "MCPBUS_EXTENSIONS_CONFIG"
	EnvDeerFlowExtensionsPath = "DEER_FLOW_EXTENSIONS_CONFIG_PATH"
	// EnvNATSURL, EnvNamespace, EnvDatabaseURL and EnvAPIListen override
	// config.yaml's nats.url, nats.namespace, database.url (a memory backend
	// becomes postgres) and api.listen when set and non-empty.
	EnvNATSURL     = "MCPBUS_NATS_URL"
	EnvNamespace   = "MCPBUS_NATS_NAMESPACE"
	EnvDatabaseURL = "MCPBUS_DATABASE_URL"
	EnvAPIListen   = "MCPBUS_API_LISTEN"
	// EnvCredentialsKey is the credentials key (`mcpbus keygen`);
	// EnvDeerFlowCredentialsKey is accepted as an alias.
	EnvCredentialsKey         = "MCPBUS_CREDENTIALS_KEY"
	EnvDeerFlowCredentialsKey = "DEER_FLOW_CREDENTIALS_KEY"
	// EnvUser and EnvThread are `mcpbus stdio`'s caller (after --user and
	// --thread).
	EnvUser   = "MCPBUS_USER"
	EnvThread = "MCPBUS_THREAD"
)

// NATSServicePasswordVar is the variable holding the NATS password of a
// service's own user (deploy/nats/accounts.conf): service is the base name
// ("mcpbus-toolcall" or "toolcall") and the variable
// MCPBUS_NATS_TOOLCALL_PASSWORD. nats-server reads the same variable to
// set the user's password, so one Secret entry serves both sides.
func NATSServicePasswordVar(service string) string {
	base := strings.TrimPrefix(service, "mcpbus-")
	return "MCPBUS_NATS_" + strings.ToUpper(strings.ReplaceAll(base, "-", "_")) + "_PASSWORD"
}

// Env is a snapshot of the process environment: ReadEnv takes it once at
// start, EnvOf builds one for a test. The zero Env has no variable set.
// It holds secrets (the credentials key): never log or print it.
type Env struct {
	vars map[string]string
}

// ReadEnv takes the process environment.
func ReadEnv() Env {
	vars := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	return Env{vars: vars}
}

// EnvOf is an Env holding exactly vars (tests).
func EnvOf(vars map[string]string) Env {
	m := make(map[string]string, len(vars))
	for k, v := range vars {
		m[k] = v
	}
	return Env{vars: m}
}

// With returns a copy of e with name set to value.
func (e Env) With(name, value string) Env {
	m := make(map[string]string, len(e.vars)+1)
	for k, v := range e.vars {
		m[k] = v
	}
	m[name] = value
	return Env{vars: m}
}

// Get returns the variable's value, "" when unset.
func (e Env) Get(name string) string { return e.vars[name] }

// CredentialsKey returns $MCPBUS_CREDENTIALS_KEY, else
// $DEER_FLOW_CREDENTIALS_KEY, else "".
func (e Env) CredentialsKey() string {
	if v := e.Get(EnvCredentialsKey); v != "" {
		return v
	}
	return e.Get(EnvDeerFlowCredentialsKey)
}

// lookupVar resolves the whole-string $VAR values of both config files. It
// is the one read of the process environment besides ReadEnv: a value may
// name any variable, and the extensions config is parsed again (with this
// process's environment) wherever it arrives from the KV bucket.
func lookupVar(name string) string { return os.Getenv(name) }
