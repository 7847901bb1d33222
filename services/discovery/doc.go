// Package discovery is the mcpbus discovery service: it owns the tool
// catalog.
//
// # Discovery and the cache
//
// Every enabled upstream MCP server is discovered in its own ephemeral
// session (spawn or connect, initialize, tools/list with pagination), all
// servers concurrently, each bounded by its session_init_timeout as one
// deadline. Servers with OAuth get their Authorization header from the
// tokens service on mcpbus.internal.token, waiting within that deadline for
// a tokens service that is not up yet; a server whose token cannot be had
// is not discovered without it (it fails the pass).
//
// The cache is the seed's per-server cache (cache.go): an entry per server
// name holds the tools with the server's configuration fingerprint and the
// interceptor chain they were discovered with. An unchanged server is never
// re-discovered; editing, disabling or deleting a server drops only its
// entry; a failed server is absent from the published catalog until a
// later lookup retries it, after Config.RetryInitial doubling per
// consecutive failure up to Config.RetryMax (in the background, only the
// failed servers due, never the healthy ones); when every enabled server
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
// compare-and-set and answers only once it is written (else unavailable,
// with a retry hint, and nothing is reset), counting the replicas that
// acknowledged it (pkg/sharedstate). Every replica that sees a newer
// generation, also after a late start, keeps serving each server's
// previous entry while it rediscovers that server in the background, and
// publishes the catalog again as each server is ready (refresh.go). Every
// published catalog change, and each server's readiness after a reset, is
// announced on mcpbus.events.catalog.
//
// # Catalog
//
// catalog.go builds visible names (prefix, the name rule, first server in
// config order wins a clash), routing.go the routing metadata and the
// <mcp_routing_hints> text, toolsearch.go deferral, catalog_hash,
// tool_search queries and auto-promotion. Task toolsets list only their
// submit tool; drift.go is the startup drift guard for task servers: a
// published config is judged against the startup publication it carries
// (the api's publication at its start), so the guard is the same on every
// replica whatever the start order, and only a task server whose restart
// fields changed is held back (failed, restart_required); status.go
// reports every server, including those the file gets wrong (invalid).
//
// # Personal connections
//
// A lookup with a user_id (mcpbus.tools.list, mcpbus.tools.search,
// mcpbus.internal.catalog) adds that user's personal MCP connections after
// the deployment catalog (personal.go, usercatalog.go). Their definitions
// come from the api on mcpbus.internal.personal, read once per user and
// reused until a change event on mcpbus.events.personal.<user> (a core
// subscription), a new generation, or Config.PersonalTTL (a missed event).
// They are discovered like any server, in the same cache, keyed by runtime
// name (p_ + a hash of user, name and definition, so an edit is a new
// server and nothing is shared between users) with the user as owner, whose
// OAuth token they get. A personal stdio connection is started only as the
// personal launch policy says (launchpolicy.Personal, Config.Personal),
// checked before every discovery, in its owner's workspace; one the policy
// refuses is a failed server naming the reason and is never started. Their tools are prefixed with the runtime name
// unless tool_name_prefix is false; a visible name a deployment server has
// stays the deployment server's. The personal part never fails a lookup:
// an api that does not answer gives a "personal-connections" entry in
// failed_servers, and a connection that does not parse, fails discovery,
// lacks a task toolset's tool or is still being discovered when the
// request's deadline nears gives an entry under its runtime name. Only the
// deployment servers decide whether the catalog is unavailable, and only
// they are in the drift guard's startup snapshot (personal connections are
// saved at runtime). Users who have not looked up their catalog for
// Config.PersonalIdle are forgotten with their discoveries.
//
// # Subjects
//
// mcpbus.tools.list and mcpbus.tools.search (agents), mcpbus.cache.reset,
// mcpbus.internal.catalog (toolcall: internal task tools included; with a
// user_id also that user's personal tools, Server being the runtime name)
// and mcpbus.internal.servers (per-server status of the deployment servers
// for GET /api/mcp/servers). Discovery asks mcpbus.internal.personal and
// listens on mcpbus.events.personal.>.
//
// mcpbus.tools.list and mcpbus.internal.catalog answer in pages when asked
// (page_size, cursor; reply.go): each page stays under half of the
// connection's max_payload, a cursor names its catalog's generation and
// revision (a cursor of another catalog is bus.CatalogChanged), and an
// unpaged request whose catalog would not fit in one message is refused
// naming max_payload (docs/nats-catalog.md).
package discovery
