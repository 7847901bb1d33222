// Package bootstrap is what every mcpbus main shares before it wires its
// services: the command-line flags for the configuration files and
// endpoints, reading the environment once (config.ReadEnv), loading
// config.yaml and extensions_config.json, the logger, the process's replica
// id, the NATS connection with the JetStream KV bucket and events stream,
// and signal handling. It opens no database: mains that run a service with
// a store open it themselves (package store/backends), so a binary without
// one links no driver. Services never import this package; they receive
// their dependencies in their Deps.
package bootstrap
