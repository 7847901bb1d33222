package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/mcpbus/mcpbus/pkg/tracing"
)

// HandlerFunc serves one decoded request.
type HandlerFunc[Req, Resp any] func(ctx context.Context, req Req) (Resp, error)

// Handler adapts fn to a micro handler. Each request runs on its own
// goroutine (micro serves one request at a time per endpoint otherwise), with
// a context bounded by the requester's deadline and cancelled by base. wg
// tracks in-flight handlers so a service can wait for them on shutdown.
//
// The goroutines are reused: a request goes to an idle worker of this
// handler when there is one, else to a new worker, so there are never fewer
// goroutines than requests in flight (no bound, no queueing) but a steady
// stream does not pay for a fresh goroutine and its stack growth per
// request. A worker idle for workerIdle exits, and every worker exits once
// base is done.
func Handler[Req, Resp any](base context.Context, wg *sync.WaitGroup, log *slog.Logger, fn HandlerFunc[Req, Resp]) micro.Handler {
	serve := func(r micro.Request) {
		defer wg.Done()
		ctx := withBoundUser(base, r)
		if ms, err := strconv.ParseInt(r.Headers().Get(HeaderTimeout), 10, 64); err == nil && ms > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
			defer cancel()
		}
		if id := r.Headers().Get(HeaderRequestID); id != "" {
			ctx = WithRequestID(ctx, id)
		}
		ctx, span := StartSpan(ctx, r)
		var req Req
		if len(r.Data()) > 0 {
			if err := json.Unmarshal(r.Data(), &req); err != nil {
				err = Wrap(CodeInvalidRequest, err, "request body is not valid JSON")
				RespondContext[Resp](ctx, r, log, *new(Resp), err)
				EndSpan(span, err)
				return
			}
		}
		resp, err := fn(ctx, req)
		RespondContext(ctx, r, log, resp, err)
		EndSpan(span, err)
	}
	idle := make(chan micro.Request) // unbuffered: a send succeeds only to a waiting worker
	return micro.HandlerFunc(func(r micro.Request) {
		wg.Add(1)
		select {
		case idle <- r:
		default:
			go worker(base, r, idle, serve)
		}
	})
}

// workerIdle is how long a handler worker waits for another request before
// it exits.
const workerIdle = 10 * time.Second

// worker serves r, then every request handed to it on idle until none comes
// for workerIdle or base is done.
func worker(base context.Context, r micro.Request, idle <-chan micro.Request, serve func(micro.Request)) {
	serve(r)
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		select {
		case r = <-idle:
			serve(r)
			t.Reset(workerIdle)
		case <-t.C:
			return
		case <-base.Done():
			return
		}
	}
}

// LogFailure logs the cause of a failed request, which never reaches the
// caller: an internal error as an error; a config_error or unavailable that
// has a cause (what the operator must fix: a database down, a workspace
// that cannot be created) as a warning; any other error with a cause at
// debug level. attrs say where (subject, path).
func LogFailure(ctx context.Context, log *slog.Logger, err error, attrs ...any) {
	e := AsError(err)
	if log == nil || e == nil {
		return
	}
	attrs = append(attrs, "code", string(e.Code), "error", err)
	switch {
	case e.Code == CodeInternal:
		log.ErrorContext(ctx, "request failed", attrs...)
	case e.Cause == nil:
	case e.Code == CodeConfigError || e.Code == CodeUnavailable:
		log.WarnContext(ctx, "request failed", attrs...)
	default:
		log.DebugContext(ctx, "request failed", attrs...)
	}
}

// Respond writes resp as JSON, or err as an error reply with the
// Mcpbus-Error header. Only the public message crosses the bus.
func Respond[Resp any](r micro.Request, log *slog.Logger, resp Resp, err error) {
	RespondContext(context.Background(), r, log, resp, err)
}

// RespondContext is Respond logging under ctx (its trace id).
func RespondContext[Resp any](ctx context.Context, r micro.Request, log *slog.Logger, resp Resp, err error) {
	if err != nil {
		e := AsError(err)
		LogFailure(ctx, log, err, "subject", r.Subject())
		body, _ := json.Marshal(ErrorReply{Error: &Error{Code: e.Code, Message: e.Message, Details: e.Details}})
		if rerr := r.Respond(body, micro.WithHeaders(micro.Headers{HeaderError: []string{string(e.Code)}})); rerr != nil && log != nil {
			log.WarnContext(ctx, "cannot send reply", "subject", r.Subject(), "error", rerr)
		}
		return
	}
	body, merr := json.Marshal(resp)
	if merr != nil {
		RespondContext[Resp](ctx, r, log, resp, Wrap(CodeInternal, merr, "cannot encode reply"))
		return
	}
	rerr := r.Respond(body)
	if rerr != nil && strings.Contains(rerr.Error(), nats.ErrMaxPayload.Error()) {
		// micro does not wrap the cause. Without this the requester would
		// wait for its deadline and report a timeout.
		RespondContext[Resp](ctx, r, log, resp, Wrap(CodeInternal, rerr, fmt.Sprintf(
			"the reply (%d bytes) is larger than the bus accepts: raise max_payload on the NATS servers", len(body))))
		return
	}
	if rerr != nil && log != nil {
		log.WarnContext(ctx, "cannot send reply", "subject", r.Subject(), "error", rerr)
	}
}

// StartSpan starts the server span of r under the trace context its
// headers carry (Request injects it on the requester's side); end it with
// EndSpan. Handler does so for every request it serves.
func StartSpan(ctx context.Context, r micro.Request) (context.Context, trace.Span) {
	if !tracing.Active() {
		return ctx, noop.Span{}
	}
	ctx = tracing.Extract(ctx, tracing.Header(r.Headers()))
	return tracing.StartNATS(ctx, trace.SpanKindServer, r.Subject())
}
