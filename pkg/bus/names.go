package bus

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
)

// Names are the NATS names of one deployment: every subject, KV bucket,
// stream and micro service name mcpbus uses comes from a Names value, so
// that several deployments (staging and production, or parallel test runs)
// share one NATS account without reading each other's configuration,
// generation, presence, calls or events.
//
// The deployment namespace (config.yaml nats.namespace) prefixes them:
//
//	namespace ""     mcpbus.tools.call       MCPBUS      MCPBUS_PRESENCE      MCPBUS_EVENTS      mcpbus-discovery
//	namespace "stg"  stg.mcpbus.tools.call   stg_MCPBUS  stg_MCPBUS_PRESENCE  stg_MCPBUS_EVENTS  stg_mcpbus-discovery
//
// The zero value is the empty namespace: today's names exactly, without
// per-user subjects (see identity.go for those). A Names is
// a plain value, built once from the settings (NewNames) and handed to
// every service through its Deps; there is no package-level namespace.
type Names struct {
	ns string
	// subj prefixes subjects ("" or ns + "."); js prefixes JetStream and
	// micro names ("" or ns + "_").
	subj, js string
	// userSubjects: the services also serve the per-user subjects
	// (nats.bind_identity; see identity.go).
	userSubjects bool
}

// NamespacePattern is what a namespace may be: letters, digits, '-' and '_'
// (valid in subjects, KV bucket, stream and micro service names), at most
// 32 characters.
var NamespacePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// NewNames returns the names of namespace ns ("" for the default names),
// or an error when ns is not a valid namespace.
func NewNames(ns string) (Names, error) {
	if ns == "" {
		return Names{}, nil
	}
	if !NamespacePattern.MatchString(ns) {
		return Names{}, fmt.Errorf("namespace %q must be 1 to 32 letters, digits, '-' or '_'", ns)
	}
	return Names{ns: ns, subj: ns + ".", js: ns + "_"}, nil
}

// Namespace is the namespace ("" for the default names).
func (n Names) Namespace() string { return n.ns }

func (n Names) subject(s string) string { return n.subj + s }

// Root is the prefix of every subject of the deployment ("mcpbus", or
// "<ns>.mcpbus"); Root()+".>" matches all of them.
func (n Names) Root() string { return n.subject("mcpbus") }

// Request/reply subjects (DESIGN §4).

func (n Names) ToolsList() string   { return n.Plain(VerbToolsList) }
func (n Names) ToolsSearch() string { return n.Plain(VerbToolsSearch) }
func (n Names) ToolsCall() string   { return n.Plain(VerbToolsCall) }
func (n Names) CacheReset() string  { return n.subject("mcpbus.cache.reset") }
func (n Names) TasksList() string   { return n.Plain(VerbTasksList) }
func (n Names) TasksGet() string    { return n.Plain(VerbTasksGet) }
func (n Names) TasksCancel() string { return n.Plain(VerbTasksCancel) }

// InternalPrefix starts every service-to-service subject ("mcpbus.internal.").
// Nothing outside the services may publish or subscribe below it.
func (n Names) InternalPrefix() string { return n.subject("mcpbus.internal.") }

// Internal is a service's own internal subject: InternalPrefix + rest (for
// example "toolcall.sessions.close").
func (n Names) Internal(rest string) string { return n.InternalPrefix() + rest }

// InternalCall is a tool call made by another service (the task poller's
// status and cancel calls) with background credentials only.
func (n Names) InternalCall() string { return n.Internal("call") }

// InternalToken asks the tokens service for an access token.
func (n Names) InternalToken() string { return n.Internal("token") }

// InternalCatalog returns the whole catalog with routing data (server and
// raw tool name per visible name) for the toolcall service.
func (n Names) InternalCatalog() string { return n.Internal("catalog") }

// InternalServers returns the per-server discovery status of the replica
// that answers (GET /api/mcp/servers).
func (n Names) InternalServers() string { return n.Internal("servers") }

// InternalRediscover is where toolcall asks every discovery replica to
// rediscover one server after its list_changed (RediscoverRequest;
// published, no reply).
func (n Names) InternalRediscover() string { return n.Internal("discovery.rediscover") }

// InternalPersonal returns one user's personal MCP connections; see
// PersonalServersRequest.
func (n Names) InternalPersonal() string { return n.Internal("personal") }

// Health is the per-service health subject ("mcpbus.internal.health.<service>",
// service being the base name such as ServiceDiscovery).
func (n Names) Health(service string) string { return n.Internal("health." + service) }

// InternalMCPStream is the subject of one MCP session's open SSE stream
// (the 2024-11-05 transport's /sse): the api replica that holds the stream
// listens there, and whichever replica receives the session's POST
// /messages publishes the response to it. The subject carries the
// session id's Digest, never the id (NATS monitoring shows subjects).
func (n Names) InternalMCPStream(sessionID string) string {
	return n.Internal("mcp.stream." + Digest(sessionID))
}

// Digest is the hex SHA-256 of s: how a session id appears on the bus and
// in stored keys, never as itself. A session id is random (128 bits and
// more), so its digest can be neither reversed nor guessed, and a key
// would add nothing.
func Digest(s string) string {
	var out [2 * sha256.Size]byte
	return string(AppendDigest(out[:0], s))
}

// AppendDigest appends Digest(s) to dst (to build a key of several digests
// in one allocation).
func AppendDigest(dst []byte, s string) []byte {
	var b [128]byte // on the stack for the usual lengths
	sum := sha256.Sum256(append(b[:0], s...))
	return hex.AppendEncode(dst, sum[:])
}

// DigestBytes is Digest of b's bytes, with one allocation (the string).
func DigestBytes(b []byte) string {
	sum := sha256.Sum256(b)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// InternalMCPPromoted announces that tool_search promoted tools for a user
// ({"user_id", "thread_id"}): every api replica sends that user's open
// streams notifications/tools/list_changed.
func (n Names) InternalMCPPromoted() string { return n.Internal("mcp.promoted") }

// Events subjects (all captured by EventsStream).

// EventsAll matches every event subject: the subjects of EventsStream.
func (n Names) EventsAll() string { return n.subject("mcpbus.events.>") }

// EventsCatalog announces a catalog change to agent workers.
func (n Names) EventsCatalog() string { return n.subject("mcpbus.events.catalog") }

// TaskEvents is the task events subject of a thread.
func (n Names) TaskEvents(threadID string) string {
	return n.subject("mcpbus.events.tasks.") + threadID
}

// PinEvents tells every discovery replica that an admin decided a tool
// pin (body PinEvent): the server is discovered again under the new
// approval.
func (n Names) PinEvents() string { return n.subject("mcpbus.events.pins") }

// PersonalEventsAll matches every user's personal-connection change event.
func (n Names) PersonalEventsAll() string { return n.subject("mcpbus.events.personal.>") }

// PersonalEvents is the change event subject of one user's personal
// connections: '.', '*', '>', spaces and control characters in the id
// become '_'. The body carries the exact id.
func (n Names) PersonalEvents(userID string) string {
	b := []byte(userID)
	for i, c := range b {
		if c == '.' || c == '*' || c == '>' || c <= ' ' {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		b = []byte("_")
	}
	return n.subject("mcpbus.events.personal.") + string(b)
}

// JetStream names.

// ConfigBucket holds the shared config and the cache generation
// (KVKeyConfig, KVKeyGen).
func (n Names) ConfigBucket() string { return n.js + "MCPBUS" }

// PresenceBucket holds replicas' heartbeats (pkg/presence).
func (n Names) PresenceBucket() string { return n.js + "MCPBUS_PRESENCE" }

// MCPSessionsBucket holds the aggregated MCP endpoint's sessions (the api
// service): one entry per Mcp-Session-Id, expiring after the idle timeout,
// so every api replica accepts every session.
func (n Names) MCPSessionsBucket() string { return n.js + "MCPBUS_MCP_SESSIONS" }

// MCPPromotionsBucket holds the tools tool_search promoted over the MCP
// endpoint, per (user, thread), so every api replica and mcpbus stdio list
// and call them.
func (n Names) MCPPromotionsBucket() string { return n.js + "MCPBUS_MCP_PROMOTIONS" }

// MCPStatesBucket holds the sealed requestStates already sent back
// (MCPStatesKV).
func (n Names) MCPStatesBucket() string { return n.js + "MCPBUS_MCP_STATES" }

// QuotasBucket holds the quota counters (QuotasKV, pkg/quota) of virtual
// servers and servers: a window's count ("w.<group>.<hash>.<secs>.<n>")
// and a semaphore's calls in flight ("s.<group>.<hash>").
func (n Names) QuotasBucket() string { return n.js + "MCPBUS_QUOTAS" }

// ConsoleSessionsBucket holds the web console's sign-in sessions (the api
// service), keyed by the SHA-256 of the session cookie, so every api
// replica accepts every session.
func (n Names) ConsoleSessionsBucket() string { return n.js + "MCPBUS_CONSOLE_SESSIONS" }

// EventsStream keeps the events (EventsAll).
func (n Names) EventsStream() string { return n.js + "MCPBUS_EVENTS" }

// Service is the NATS micro name of a service (base such as
// ServiceDiscovery): "<ns>_mcpbus-discovery" in a namespace, so `nats micro
// ls` tells deployments apart and $SRV pings reach one deployment's
// services only.
func (n Names) Service(base string) string { return n.js + base }

// ServiceInbox is the reply inbox prefix of a service's NATS connections
// (base such as ServiceAPI): "_INBOX.mcpbus-api", "_INBOX.stg_mcpbus-api"
// in a namespace. The service's NATS user (named after the service in
// deploy/nats/accounts.conf) may subscribe there and nowhere else under
// _INBOX, so no service reads another's replies. It stays under "_INBOX."
// (ReplyAllowed accepts it) and no agent worker's inbox ("_INBOX_<user>.")
// can equal it.
func (n Names) ServiceInbox(base string) string { return "_INBOX." + n.Service(base) }
