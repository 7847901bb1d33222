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
func Request[Resp any](ctx context.Context, nc *nats.Conn, subject string, req any) (Resp, error) {
	reply, err := request(ctx, nc, subject, req)
	if err != nil {
		var zero Resp
		return zero, err
	}
	return DecodeReply[Resp](reply)
}

// RequestRaw is Request without the decoding: the reply's JSON body as the
// responder encoded it, for a caller that only forwards it (the api's REST
// call path). Errors are Request's, error replies included.
func RequestRaw(ctx context.Context, nc *nats.Conn, subject string, req any) (json.RawMessage, error) {
	reply, err := request(ctx, nc, subject, req)
	if err != nil {
		return nil, err
	}
	if err := replyError(reply); err != nil {
		return nil, err
	}
	return reply.Data, nil
}

// request sends req and returns the reply message, or the transport's
// error as a coded *Error.
func request(ctx context.Context, nc *nats.Conn, subject string, req any) (reply *nats.Msg, err error) {
	ctx, span := tracing.StartNATS(ctx, trace.SpanKindClient, subject)
	defer func() {
		if err == nil && span.IsRecording() {
			EndSpan(span, replyError(reply)) // an error reply is the span's outcome
			return
		}
		EndSpan(span, err)
	}()
	data, err := json.Marshal(req)
	if err != nil {
		return nil, Wrap(CodeInvalidRequest, err, "cannot encode request for "+subject)
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
	// A request whose connection drops while it waits is given up at once
	// (errConnDropped): its reply would be lost while the connection is
	// away.
	wait, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	stop := context.AfterFunc(dropped(nc), func() { giveUp(errConnDropped) })
	defer stop()
	reply, err = nc.RequestMsgWithContext(wait, msg)
	if err != nil {
		switch {
		case errors.Is(context.Cause(wait), errConnDropped) && ctx.Err() == nil:
			return nil, Wrap(CodeUnavailable, errConnDropped, "the connection to NATS dropped while waiting for a reply on "+subject)
		case errors.Is(err, nats.ErrNoResponders):
			return nil, Wrap(CodeUnavailable, err, "no service answers "+subject)
		case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
			return nil, Wrap(CodeUpstreamTimeout, err, "timed out waiting for a reply on "+subject)
		case errors.Is(err, context.Canceled):
			return nil, Wrap(CodeUnavailable, err, "request on "+subject+" was cancelled")
		case errors.Is(err, nats.ErrMaxPayload):
			return nil, Wrap(CodeInvalidRequest, err, fmt.Sprintf(
				"the request (%d bytes) is larger than the bus accepts (max_payload %d bytes)", len(data), nc.MaxPayload()))
		default:
			return nil, Wrap(CodeUnavailable, err, "cannot reach "+subject)
		}
	}
	return reply, nil
}

// DecodeReply rebuilds a reply: an *Error when it carries Mcpbus-Error, else
// the decoded Resp.
func DecodeReply[Resp any](reply *nats.Msg) (Resp, error) {
	var zero Resp
	if err := replyError(reply); err != nil {
		return zero, err
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

// replyError is the *Error an error reply carries (Mcpbus-Error, or a micro
// service error), or nil.
func replyError(reply *nats.Msg) error {
	if code := reply.Header.Get(HeaderError); code != "" {
		var er ErrorReply
		if err := json.Unmarshal(reply.Data, &er); err != nil || er.Error == nil {
			return &Error{Code: Code(code), Message: "request failed"}
		}
		return er.Error
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		return &Error{Code: CodeInternal, Message: fmt.Sprintf("service error %s: %s", code, reply.Header.Get("Nats-Service-Error"))}
	}
	return nil
}
