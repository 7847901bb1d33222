// Package api is the mcpbus REST API for the agent UI (echo): the catalog,
// tool calls, cache reset, health and readiness, later config management,
// tasks and personal connections. It owns the extensions config file: it
// publishes the file to the KV bucket at start and whenever its signature
// changes, so every other service follows it without a shared file system.
// Every other operation is a request over NATS to the service that owns it.
package api
