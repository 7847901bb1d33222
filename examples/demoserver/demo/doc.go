// Package demo is a small MCP server used by the mcpbus examples and tests.
//
// [NewServer] returns an mcp-go server with these tools:
//
//   - echo {message}: text content equal to message.
//   - add {a, b}: text of the sum plus structuredContent {"sum": a+b}.
//   - weather {city}: structuredContent {"city", "temperature_c": 21,
//     "conditions": "sunny"} with an output schema and a JSON text fallback.
//   - slow {seconds (default 2, max 120)}: sleeps, honouring cancellation,
//     then returns "done after Ns".
//   - fail {message}: an isError result carrying message.
//   - whoami: the X-* and Authorization headers of the HTTP request that
//     carried the call (text JSON), and structuredContent {"headers", "cwd",
//     "tmpdir", "pid"}.
//   - progress {steps (default 3, max 100)}: one notifications/progress per
//     step when the call carries a progressToken, then "done after N steps"
//     with the result _meta {"demo/steps": N}.
//   - block: waits until the call is cancelled (at most 120s).
//   - cancellations: structuredContent {"blocked_cancelled",
//     "cancel_notifications", "in_flight"}: block calls cancelled, the
//     notifications/cancelled the transport saw ([Cancellations]), and
//     block calls waiting now.
//   - submit_report, get_report_status, cancel_report, answer_report: a
//     durable task toolset in the DeerFlow protocol (see tasks.go).
//
// Task progress is deterministic: every get_report_status call advances a
// task by one step, so tests need neither timers nor sleeps. With
// [Config.StateDir] set, tasks are kept as JSON files so that a restarted
// stdio server still knows them.
package demo
