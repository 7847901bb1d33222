// Package bootstrap is the wiring every mcpbus process shares: command-line
// flags for the configuration files and endpoints, loading config.yaml and
// extensions_config.json, the logger, the NATS connection with the JetStream
// KV bucket and events stream, the database, and running a service until a
// signal arrives. Mains parse and wire; they do nothing else.
package bootstrap
