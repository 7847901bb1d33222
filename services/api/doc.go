// Package api is the mcpbus REST API for the agent UI (echo): the catalog,
// tool calls, cache reset, config management, personal connections,
// health, readiness, metrics and the OpenAPI document. Every other
// operation is a request over NATS to the service that owns it.
//
// # Config file
//
// The api owns the extensions config file. It publishes the file to the KV
// bucket at start and whenever its signature changes (hand edits), so every
// other service follows it without a shared file system. GET
// /api/mcp/config serves the file as written ($VAR placeholders) with
// secrets masked (configedit.MaskServerEntry); PUT and PATCH edit it under a
// process-wide lock (configedit.EditFileCommit), validate the servers the
// write changes with the config rules every service applies, refuse a
// change of a task server's restart fields (409), write it atomically,
// publish it (200 only once the KV bucket has it; otherwise the file is put
// back and the answer is 503) and ask mcpbus.cache.reset to reset every
// replica's caches. A file the service cannot write makes the config API
// read-only (409). The rules are written down in
// docs/configuration-rules.md.
//
// # Personal connections
//
// Users keep their own MCP servers in mcp_personal_connections (Deps.Store).
// A connection's runtime name is bus.PersonalRuntimeName(user, name,
// definition); its OAuth chain row is keyed by that runtime name, so an
// edit that changes the definition (or a delete) removes the old row. The
// api answers bus.Names.InternalPersonal with a user's definitions for
// discovery and toolcall, and announces changes on
// bus.Names.PersonalEvents(user).
//
// # Browsers and limits
//
// Every route goes through the checks of package httpguard (JSON content
// type on POST, PUT and PATCH; with no API keys, a loopback Host and no
// cross-site Origin), so a web page cannot drive the API. The HTTP server
// has read, header and idle timeouts and a header size cap but no global
// write timeout (streamed responses). A user keeps at most
// Config.MaxPersonalPerUser personal connections.
//
// # MCP endpoint
//
// /mcp (streamable HTTP), /sse and /messages (2024-11-05) serve the
// caller's catalog as one MCP server (mcp.go): the protocol is
// pkg/mcpserver's, the transports, sessions (JetStream KV) and streams are
// package internal/mcphttp's; identity is the REST bearer key (identify).
//
// # Errors
//
// Every failure is {"error": {code, message, details?}}; errorHandler is the
// one place codes become HTTP statuses.
package api
