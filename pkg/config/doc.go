// Package config loads and validates mcpbus configuration: the DeerFlow
// extensions_config.json (mcpServers, mcpInterceptors, skills and any other
// top-level keys kept verbatim) and config.yaml (mcpbus settings, every key
// with a default).
//
// Loading is forgiving per server and strict per file: a server with a bad
// entry is skipped with a Problem naming the file, the server and the field,
// and the others still load; a file that cannot be read or parsed is an
// error. Whole-string "$VAR" values are expanded after parsing; keys never.
//
// The environment is read in env.go only: a main takes an Env once
// (ReadEnv) and passes it to FindSettingsPath, LoadSettings, LoadExtensions
// and the rest. The REST config editor lives beside the api
// (services/api/internal/configedit) and the launch policy in
// pkg/launchpolicy.
package config
