// Package discovery is the mcpbus discovery service: it owns the tool
// catalog. It discovers every enabled upstream MCP server in its own
// ephemeral session (initialize, tools/list), keeps a per-server cache keyed
// by server name and invalidated by the server's configuration fingerprint,
// applies tool-name prefixes and name checks, and serves the catalog on
// mcpbus.tools.list (agents) and mcpbus.internal.catalog (toolcall). Cache
// resets go through the KV generation so every replica drops its cache.
package discovery
