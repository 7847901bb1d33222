// Package bus is the NATS contract of mcpbus: the subjects, the request and
// reply envelopes, the error codes that survive the hop between services, a
// request helper with deadlines, the JetStream names (KV bucket, event
// stream) and an embedded NATS server with JetStream for dev mode and tests.
//
// A reply is JSON. A failed request replies {"error": {code, message,
// details?}} and carries the header Mcpbus-Error: <code>; Request rebuilds
// that into an *Error whose Is compares codes, so callers use errors.Is with
// the sentinel values (ErrNotFound, …) across process boundaries.
package bus
