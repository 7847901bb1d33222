// Package bus is the NATS contract of mcpbus: the subjects, the request and
// reply envelopes, the error codes that survive the hop between services, a
// request helper with deadlines, the JetStream names (KV bucket, event
// stream) and an embedded NATS server with JetStream for dev mode and tests.
//
// A reply is JSON. A failed request replies {"error": {code, message,
// details?}} and carries the header Mcpbus-Error: <code>; Request rebuilds
// that into an *Error whose Is compares codes, so callers use errors.Is with
// the sentinel values (ErrNotFound, …) across process boundaries.
//
// # Bridging MCP eras
//
// A tools/call carries the calling MCP client's capabilities that an
// upstream may act on (Call.ClientCapabilities: elicitation,
// sampling and roots only, each a JSON object of at most
// MaxCapabilityBytes; nil when the caller is not an MCP client) and, when
// it retries a multi-round-trip call, its answers
// (Call.Input: inputResponses and the echoed requestState,
// bounded by MaxInputResponsesBytes and MaxRequestStateBytes). A
// 2026-07-28 upstream's input_required answer comes back as
// ToolsCallReply.InputRequired. A call that needs a capability the client
// lacks fails with CodeClientCapabilityMissing (MCP -32021), naming the
// server in Details["server"] and the capabilities in
// Details["required_capabilities"]. A call whose MCP client can be asked
// for input names an ask inbox (Call.AskInbox,
// mcpbus.ask.<token>), where toolcall sends a legacy upstream's
// server-to-client requests (AskRequest, answered with AskReply); a
// legacy client's answers to requests the api sent it travel on
// Names.MCPClientAnswer. See bridge.go.
//
// # The catalog in pages
//
// mcpbus.tools.list and the internal catalog answer a page at a time when
// asked (ToolsListRequest.PageSize, Cursor; ToolsListReply.NextCursor,
// Revision), each page under half of max_payload; a cursor of a catalog
// that changed is CatalogChanged. ListCatalog walks the pages into one
// reply and starts again when the catalog changes under it. See
// catalog.go and docs/nats-catalog.md.
package bus
