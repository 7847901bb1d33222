// Package discovery is the mcpbus discovery service: it owns the tool
// catalog.
//
// # Discovery and the cache
//
// Every enabled upstream MCP server is discovered in its own ephemeral
// session (spawn or connect, initialize, tools/list with pagination), all
// servers concurrently, each bounded by its session_init_timeout as one
// deadline. Servers with OAuth get their Authorization header from the
// tokens service on mcpbus.internal.token.
//
// The cache is the seed's per-server cache (cache.go): an entry per server
// name holds the tools with the server's configuration fingerprint and the
// interceptor chain they were discovered with. An unchanged server is never
// re-discovered; editing, disabling or deleting a server drops only its
// entry; a failed server is absent for that pass; when every enabled server
// fails nothing is published and the next lookup retries. Lookups of one
// configuration share one pass (passes share per-server discoveries) and
// the published catalog is kept per configuration and generation, so a warm
// lookup talks to nobody and mcpbus.tools.list answers a plain request with
// the catalog's encoded reply.
//
// # Shared state
//
// The configuration and the cache generation come from the KV bucket. A
// cache reset (mcpbus.cache.reset) bumps the generation with
// compare-and-set; every replica drops its cache when it sees a newer one,
// also after a late start, and warms it again in the background. Every
// published catalog change is announced on mcpbus.events.catalog.
//
// # Catalog
//
// catalog.go builds visible names (prefix, the name rule, first server in
// config order wins a clash), routing.go the routing metadata and the
// <mcp_routing_hints> text, toolsearch.go deferral, catalog_hash,
// tool_search queries and auto-promotion. Task toolsets list only their
// submit tool; drift.go is the startup drift guard for task servers.
//
// # Subjects
//
// mcpbus.tools.list and mcpbus.tools.search (agents), mcpbus.cache.reset,
// mcpbus.internal.catalog (toolcall: internal task tools included) and
// mcpbus.internal.servers (per-server status for GET /api/mcp/servers).
package discovery
