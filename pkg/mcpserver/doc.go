// Package mcpserver is mcpbus's aggregated MCP server without a transport:
// a hand-written JSON-RPC 2.0 dispatcher that serves a caller's catalog
// (mcpbus.tools.list) as one MCP server and forwards tools/call to
// mcpbus.tools.call over NATS. The api service puts it behind streamable
// HTTP (/mcp) and the 2024-11-05 HTTP+SSE pair (/sse, /messages);
// `mcpbus stdio` puts it on stdin/stdout (ServeStdio). Transports own
// identity, sessions and streams; this package owns the protocol.
//
// # Why not mcp-go's server
//
// mcp-go's MCPServer holds one process-wide tool set and in-memory sessions.
// Here the tool set is per caller (deployment servers plus the caller's
// personal connections, promotions per thread), a session must be served by
// any api replica (its state lives outside the process), and a tools/call
// result should reach the client as the bytes toolcall returned (content
// blocks and structuredContent are json.RawMessage end to end, never decoded
// into Go types and encoded again). A dispatcher over raw JSON is smaller
// than bending that server to all three.
//
// # Eras
//
// MCP has two incompatible eras. The legacy era (2024-11-05, 2025-03-26,
// 2025-06-18, 2025-11-25) opens with initialize, negotiates a version and
// keeps a session; the modern era (2026-07-28) has server/discover, no
// session, per-request _meta (protocol version, client info and
// capabilities), Mcp-Method/Mcp-Name headers over HTTP (CheckHeaders) and
// subscriptions/listen for notifications. An Era is one method table over
// the same era-independent operations (listTools, callDecoded): Legacy and
// Modern (modern.go); tools/call has one entry per era (legacyCall,
// Modern.callTool), given the message. A transport picks the era once per
// request (IsModern, Server.EraOf: a _meta protocol version,
// server/discover, subscriptions/listen or a modern header is modern;
// initialize and the rest legacy) before it calls Dispatch; a modern HTTP
// request passes Modern.Admit first. A request's params are decoded once
// (Message.paramsOf) and every check and the call read that value.
// subscriptions/listen is the transport's to hold (Modern.Listen
// checks it and builds the acknowledgement, ListChanged the notifications).
// Modern results carry resultType, the server info in _meta and, for
// tools/list and server/discover, the caching hints (ttlMs,
// cacheScope "private": every catalog is its caller's).
//
// tools/list pages over a list built once per catalog revision, caller,
// thread promotions and task view and kept in views.go: a page by cursor
// slices the list of the cursor's revision, a first page asks for the
// current revision with a one-tool catalog page, so a walk reads the
// caller's catalog at most once (tools.go).
//
// # Tasks
//
// Both eras speak MCP's task protocol over mcpbus's durable task runtime
// (mcp_tasks and the task pollers' task API, mcpbus.tasks.*): 2025-11-25
// sessions the legacy one (tasks.go: params.task, tasks/get, tasks/result,
// tasks/list, tasks/cancel), modern requests that declare the
// io.modelcontextprotocol/tasks extension the 2026-07-28 one (tasksext.go:
// resultType "task", tasks/get inlining the result, ack-only
// tasks/update and tasks/cancel, notifications/tasks on a listen naming
// taskIds). The shared parts (the status mapping, a terminal task's tool
// result, recording a cancel, reading back a created task) are one piece
// of code each.
//
// # Bridging eras
//
// A tools/call carries what the client can do for the upstream
// (bus.Call.ClientCapabilities: a modern request's _meta
// capabilities, a legacy session's when mcpbus can ask it) and a modern
// client's retry of a multi-round-trip result (inputResponses,
// requestState). An upstream's input_required is relayed to a modern
// client (its requestState sealed to the caller and tool with
// Deps.StateSealer); for a legacy client mcpbus makes the rounds itself,
// asking it with the legacy era's server-to-client requests on the
// request's stream (ask.go) and retrying load shedding, and it answers a
// legacy upstream's own requests to the client through the call's ask
// inbox; what cannot be bridged is -32021 naming the server (bridge.go).
//
// # Sessions
//
// Session is plain data (version, user, client info, times) so that a
// transport can keep it anywhere: the api keeps it in a JetStream KV bucket
// so every replica accepts every session id; stdio keeps it in memory.
// Dispatch of initialize returns a fresh Session in Exchange.Session with
// Exchange.Created set; the transport stores it and issues its id.
//
// # Errors
//
// Malformed requests (bad JSON, a missing method, invalid params, an
// invalid_request refusal from the bus) are JSON-RPC errors, and so is a
// call of an unknown tool (-32602, the protocol error both the 2025-11-25
// and the 2026-07-28 tools pages name). A tool's own failure is a result
// with isError true, and so are mcpbus's other refusals of a well-formed
// call (deferred tool, guardrail denied, credentials missing or invalid,
// upstream failures), with a text saying what to do next. resources/*,
// prompts/* and completion/complete are federated (federation.go): an
// unmapped URI or unknown prompt is invalid params. resources/subscribe
// (legacy sessions) and a listen's resourceSubscriptions go to toolcall
// for a subscriber id of the stream's holder (subscriptions.go).
//
// # Cancellation
//
// A call's bus call id is derived from the caller, the session (legacy) or
// the stream's scope (modern stdio, Exchange.Scope) and the JSON-RPC id,
// so a notifications/cancelled naming the id cancels it on whichever
// toolcall replica runs it. A modern HTTP request has no id space to name:
// closing its response stream is the cancellation, and Modern's tools/call
// publishes mcpbus.tools.cancel when the request's context ends first.
package mcpserver
