// Package tracing is mcpbus's OpenTelemetry tracing: the process's tracer
// provider (Setup: OTLP over HTTP or gRPC, configured by
// observability.tracing and the standard OTEL_* variables), W3C trace
// context carried in NATS message headers (Inject, Extract), in HTTP
// requests to upstreams (Transport) and as a string (Traceparent, for an
// MCP request's _meta and a task row), and the span helpers the services
// use (Start, StartLinked, End, SetAttributes).
//
// # Off by default, no cost when off
//
// Until Setup installs a provider the OpenTelemetry globals are no-ops:
// Start returns a non-recording span, Inject writes nothing and Transport
// passes requests through untouched.
//
// # What never becomes an attribute
//
// Spans carry names and codes only: subjects, routes, server and tool
// names, transports, outcome codes. Arguments, results, header values,
// tokens and keys are never attributes; the helpers here take no such
// value, and the cmd/mcpbus trace test greps every exported span for them.
package tracing
