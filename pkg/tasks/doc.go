// Package tasks is the pure logic of durable MCP background tasks (the
// reference's §4): parsing and validating the submit, status and cancel
// replies of a task toolset (structuredContent only), mapping them to local
// states, the size caps, the next-poll and backoff arithmetic, tracking
// degradation, the notification event with its fingerprint and version
// rules, the outbox transitions, and the task API views.
//
// Nothing here does I/O or reads a clock: callers pass the times (a poll's
// times are when its remote call completed). The task poller and the
// toolcall service's submit path share it.
//
// # Errors
//
// A *ProtocolError is permanent: the task fails with its message. A
// *ToolError (the tool answered isError: true) is retryable. The messages are
// the reference's, word for word.
package tasks
