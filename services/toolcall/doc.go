// Package toolcall is the mcpbus toolcall service: it executes tool calls.
// A visible tool name is resolved through the discovery catalog of the
// current generation to its server and raw name (never by splitting a
// prefix); stdio servers are called through a bounded pool of per-thread
// sessions, HTTP and SSE servers through sessions reused per server and
// header fingerprint.
package toolcall
