package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// HeaderTimeout tells a responder how long the requester waits (milliseconds),
// so it can bound its own work by the same deadline.
const HeaderTimeout = "Mcpbus-Timeout-Ms"

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 30 * time.Second

type requestIDKey struct{}

// WithRequestID returns a context that carries a request id; Request sends it
// as the Mcpbus-Request-Id header.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id carried by ctx, if any.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// Request sends req as JSON to subject and decodes the reply into Resp. An
// error reply comes back as *Error with its code; no responder is
// CodeUnavailable; a deadline is CodeUpstreamTimeout. Without a deadline on
// ctx, DefaultTimeout applies.
func Request[Resp any](ctx context.Context, nc *nats.Conn, subject string, req any) (_ Resp, err error) {
	var zero Resp
	ctx, span := tracing.StartNATS(ctx, trace.SpanKindClient, subject)
	defer func() { EndSpan(span, err) }()
	data, err := json.Marshal(req)
	if err != nil {
		return zero, Wrap(CodeInvalidRequest, err, "cannot encode request for "+subject)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	msg := nats.NewMsg(subject)
	msg.Data = data
	msg.Header.Set(HeaderTimeout, strconv.FormatInt(time.Until(deadline).Milliseconds(), 10))
	if id := RequestID(ctx); id != "" {
		msg.Header.Set(HeaderRequestID, id)
	}
	if tracing.Active() {
		tracing.Inject(ctx, msg.Header)
	}
	reply, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			return zero, Wrap(CodeUnavailable, err, "no service answers "+subject)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			return zero, Wrap(CodeUpstreamTimeout, err, "timed out waiting for a reply on "+subject)
		case errors.Is(err, context.Canceled):
			return zero, Wrap(CodeUnavailable, err, "request on "+subject+" was cancelled")
		case errors.Is(err, nats.ErrMaxPayload):
			return zero, Wrap(CodeInvalidRequest, err, fmt.Sprintf(
				"the request (%d bytes) is larger than the bus accepts (max_payload %d bytes)", len(data), nc.MaxPayload()))
		default:
			return zero, Wrap(CodeUnavailable, err, "cannot reach "+subject)
		}
	}
	return DecodeReply[Resp](reply)
}

// DecodeReply rebuilds a reply: an *Error when it carries Mcpbus-Error, else
// the decoded Resp.
func DecodeReply[Resp any](reply *nats.Msg) (Resp, error) {
	var zero Resp
	if code := reply.Header.Get(HeaderError); code != "" {
		var er ErrorReply
		if err := json.Unmarshal(reply.Data, &er); err != nil || er.Error == nil {
			return zero, &Error{Code: Code(code), Message: "request failed"}
		}
		return zero, er.Error
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		return zero, &Error{Code: CodeInternal, Message: fmt.Sprintf("service error %s: %s", code, reply.Header.Get("Nats-Service-Error"))}
	}
	var out Resp
	if err := json.Unmarshal(reply.Data, &out); err != nil {
		return zero, Wrap(CodeInternal, err, "cannot decode reply")
	}
	return out, nil
}

// EndSpan ends span with err's mcpbus error code as its outcome (see
// tracing.End).
func EndSpan(span trace.Span, err error) {
	code := ""
	if err != nil && span.IsRecording() {
		code = string(AsError(err).Code)
	}
	tracing.End(span, err, code)
}
