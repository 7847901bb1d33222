package bus

// Request/reply subjects (DESIGN §4).
const (
	SubjectToolsList   = "mcpbus.tools.list"
	SubjectToolsSearch = "mcpbus.tools.search"
	SubjectToolsCall   = "mcpbus.tools.call"
	SubjectCacheReset  = "mcpbus.cache.reset"
	SubjectTasksList   = "mcpbus.tasks.list"
	SubjectTasksGet    = "mcpbus.tasks.get"
	SubjectTasksCancel = "mcpbus.tasks.cancel"

	// SubjectInternalCall is a tool call made by another service (the task
	// poller's status and cancel calls) with background credentials only.
	SubjectInternalCall = "mcpbus.internal.call"
	// SubjectInternalToken asks the tokens service for an access token.
	SubjectInternalToken = "mcpbus.internal.token"
	// SubjectInternalCatalog returns the whole catalog with routing data
	// (server and raw tool name per visible name) for the toolcall service.
	SubjectInternalCatalog = "mcpbus.internal.catalog"

	// SubjectEventsCatalog announces a catalog change to agent workers.
	SubjectEventsCatalog = "mcpbus.events.catalog"
	// SubjectEventsTasksPrefix is followed by the thread id.
	SubjectEventsTasksPrefix = "mcpbus.events.tasks."
)

// JetStream names.
const (
	KVBucket     = "MCPBUS"
	KVKeyConfig  = "config"
	KVKeyGen     = "generation"
	EventsStream = "MCPBUS_EVENTS"
	// KVBucketPresence holds replicas' heartbeats (pkg/presence).
	KVBucketPresence = "MCPBUS_PRESENCE"
	EventsSubject    = "mcpbus.events.>"
)

// Headers.
const (
	HeaderRequestID = "Mcpbus-Request-Id"
	HeaderError     = "Mcpbus-Error"
)

// Service names as registered with NATS micro.
const (
	ServiceDiscovery  = "mcpbus-discovery"
	ServiceToolcall   = "mcpbus-toolcall"
	ServiceTaskpoller = "mcpbus-taskpoller"
	ServiceTokens     = "mcpbus-tokens"
	ServiceAPI        = "mcpbus-api"
)

// HealthSubject is the per-service health subject ("mcpbus.internal.health.<service>").
func HealthSubject(service string) string { return "mcpbus.internal.health." + service }

// KVBucketMCPSessions holds the aggregated MCP endpoint's sessions (the
// api service): one entry per Mcp-Session-Id, expiring after the idle
// timeout, so every api replica accepts every session.
const KVBucketMCPSessions = "MCPBUS_MCP_SESSIONS"

// SubjectInternalMCPStreamPrefix is followed by an MCP session id: the api
// replica that holds the session's open SSE stream (the 2024-11-05
// transport's /sse) listens there, and whichever replica receives the
// session's POST /messages publishes the response to it.
const SubjectInternalMCPStreamPrefix = "mcpbus.internal.mcp.stream."

// KVBucketMCPPromotions holds the tools tool_search promoted over the MCP
// endpoint, per (user, thread), so every api replica and mcpbus stdio
// lists and calls them.
const KVBucketMCPPromotions = "MCPBUS_MCP_PROMOTIONS"

// SubjectInternalMCPPromoted announces that tool_search promoted tools for
// a user ({"user_id", "thread_id"}): every api replica sends that user's
// open streams notifications/tools/list_changed.
const SubjectInternalMCPPromoted = "mcpbus.internal.mcp.promoted"
