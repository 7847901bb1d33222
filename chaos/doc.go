// Package chaos is the mcpbus fault suite: a harness that runs a whole
// deployment as separate processes (tokens, discovery, api, and two
// replicas each of toolcall and taskpoller, built from this tree) against
// its own nats-server with JetStream and a PostgreSQL schema, with the demo
// MCP server as stdio and HTTP upstreams; drives a steady load of tool calls
// and durable tasks over NATS; injects one fault at a time (SIGKILL of a
// replica, a NATS or PostgreSQL restart, a broken upstream, a full restart
// with an edited config); and records every request's outcome in a [Table].
//
// The tests of this package are the suite. By default (inside make test) a
// short subset runs; MCPBUS_CHAOS=full runs every fault and a 10-minute
// soak (make chaos). See chaos_test.go.
package chaos
