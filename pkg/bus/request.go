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
	if id := RequestID(ctx); id != "" {
		msg.Header.Set(HeaderRequestID, id)
	}
	if tracing.Active() {
		tracing.Inject(ctx, msg.Header)
	}
	var reconnected time.Time // when a wait for the connection ended
	backoff := 50 * time.Millisecond
	for {
		var waited bool
		reply, waited, err = send(ctx, nc, msg, deadline)
		if waited {
			reconnected = time.Now()
		}
		switch {
		case ctx.Err() != nil:
		case unsent(err):
			// The connection dropped between WaitConnected and the
			// publish: nothing was sent; wait for it again.
			continue
		case errors.Is(err, nats.ErrNoResponders) &&
			((!reconnected.IsZero() && time.Since(reconnected) < resubscribeGrace) || reconnectedWithin(nc, resubscribeGrace)):
			// Sent right after NATS came back (this request waited for
			// it, or the connection reconnected a moment ago), before the
			// responders' own connections did: nobody received it, so it
			// can be sent again.
			if pause(ctx, &backoff) {
				continue
			}
		}
		break
	}
	if err != nil {
		switch {
		case errors.Is(err, errNotSent), unsent(err):
			return nil, Wrap(CodeUnavailable, errNotSent, "not connected to NATS before the request's deadline: the request on "+subject+" was not sent")
		case errors.Is(err, errConnDropped):
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

// resubscribeGrace is how long after its connection came back a request
// that found no responder is sent again (with backoff, within its
// deadline): the responders' connections reconnect on their own schedule
// (every 250 ms) and resubscribe.
const resubscribeGrace = 5 * time.Second

// send publishes msg once nc is connected (waiting for a reconnect up to
// ctx's end: a request is never left in a reconnect buffer to be
// delivered after its caller gave up) and waits for the reply. A
// connection that drops while the reply is awaited ends the wait at once
// with errConnDropped: the reply would be lost while the connection is
// away. A publish refused because the connection dropped again before it
// (nats.ErrReconnectBufExceeded) is returned as it is: nothing was sent.
// waited reports that nc was not connected when send began.
func send(ctx context.Context, nc *nats.Conn, msg *nats.Msg, deadline time.Time) (reply *nats.Msg, waited bool, err error) {
	waited = !nc.IsConnected()
	if err := WaitConnected(ctx, nc); err != nil {
		if ctx.Err() != nil {
			return nil, waited, errNotSent
		}
		return nil, waited, err
	}
	// The responder learns how long is left once the request goes out.
	msg.Header.Set(HeaderTimeout, strconv.FormatInt(time.Until(deadline).Milliseconds(), 10))
	wait, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	stop := context.AfterFunc(dropped(nc), func() { giveUp(errConnDropped) })
	defer stop()
	reply, err = nc.RequestMsgWithContext(wait, msg)
	if err != nil && errors.Is(context.Cause(wait), errConnDropped) && ctx.Err() == nil && !unsent(err) {
		return nil, waited, errConnDropped
	}
	return reply, waited, err
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
