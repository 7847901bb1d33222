package mcpclient

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync/atomic"
)

// DefaultMaxResponseBytes is Spec.MaxResponseBytes when unset: the
// embedded NATS server's max_payload, the largest result the bus carries.
const DefaultMaxResponseBytes = 8 << 20

// ErrResponseTooLarge is matched (errors.Is) by a *ResponseTooLargeError.
var ErrResponseTooLarge = errors.New("upstream response too large")

// ResponseTooLargeError reports an upstream response (an HTTP body, an SSE
// event or a stdio line) that crossed Spec.MaxResponseBytes. Reading stopped
// there: nothing past the limit was buffered.
type ResponseTooLargeError struct {
	Server string
	Limit  int64
}

func (e *ResponseTooLargeError) Error() string {
	return fmt.Sprintf("MCP server %q sent a response larger than the limit of %d bytes (max_response_bytes)", e.Server, e.Limit)
}

// Is makes errors.Is(err, ErrResponseTooLarge) true.
func (e *ResponseTooLargeError) Is(target error) bool { return target == ErrResponseTooLarge }

// tripFlag records that a response of one request (or of the client's
// stream) crossed the limit, and the WWW-Authenticate values of a 403 the
// request got (a server asking for a wider scope: ForbiddenError).
type tripFlag struct {
	atomic.Bool
	challenge atomic.Pointer[[]string]
}

// limitTransport caps every response body it returns: a whole body, or
// for text/event-stream each event, as read. onStream is called when a body
// without a request flag (a long-lived stream) trips.
type limitTransport struct {
	base     http.RoundTripper
	limit    int64
	tooLarge error
	onStream func()
	// logs routes the log messages read off a request's SSE response
	// (notify.go).
	logs *logRouter
	// gate holds the session's GET stream until the handshake said the
	// server announces list changes (notify.go); nil: no gate.
	gate *listenGate
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.gate != nil && req.Method == http.MethodGet && req.Header.Get("Last-Event-ID") == "" {
		if err := t.gate.wait(req.Context()); err != nil {
			return nil, err
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	x := exchangeOf(req.Context())
	var flag *tripFlag
	if x != noExchange {
		flag = &x.trip
	}
	if flag != nil && resp.StatusCode == http.StatusForbidden {
		if v := resp.Header.Values("WWW-Authenticate"); len(v) > 0 {
			flag.challenge.Store(&v)
		}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	lb := &limitedBody{rc: resp.Body, left: t.limit, limit: t.limit, perEvent: mt == "text/event-stream", err: t.tooLarge, trip: func() {
		if flag != nil {
			flag.Store(true)
		} else if t.onStream != nil {
			t.onStream()
		}
	}}
	if lb.perEvent && t.logs != nil {
		if lc := x.log; lc != nil {
			lb.tee = &logTee{lc: lc, router: t.logs}
		} else if req.Method == http.MethodGet {
			// The session's GET stream (notify.go).
			lb.tee = &logTee{router: t.logs}
		}
	}
	resp.Body = lb
	resp.ContentLength = -1 // the body may end early
	return resp, nil
}

// limitedBody fails once more than limit bytes arrive (per event when
// perEvent: the count restarts at each blank line).
type limitedBody struct {
	rc          io.ReadCloser
	left, limit int64
	perEvent    bool
	lastNL      bool // the previous byte (ignoring \r) was \n
	err         error
	trip        func()
	tripped     bool
	// tee, when set, reads the request's log messages off the stream.
	tee *logTee
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.tripped {
		return 0, b.err
	}
	n, err := b.rc.Read(p)
	if !b.perEvent {
		b.left -= int64(n)
	} else {
		for _, c := range p[:n] {
			switch {
			case c == '\n' && b.lastNL:
				b.left = b.limit
			case c == '\n':
				b.lastNL = true
				b.left--
			case c == '\r':
				b.left--
			default:
				b.lastNL = false
				b.left--
			}
		}
	}
	if b.left < 0 {
		b.tripped = true
		b.trip()
		_ = b.rc.Close()
		return 0, b.err
	}
	if b.tee != nil {
		b.tee.feed(p[:n])
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// lineLimitReader fails once a line (the bytes since the last \n) is
// longer than limit, so mcp-go's unbounded ReadString on a stdio child's
// stdout never buffers more than that.
type lineLimitReader struct {
	r           io.Reader
	limit, line int64
	err         error
	trip        func()
	tripped     atomic.Bool
}

func (l *lineLimitReader) Read(p []byte) (int, error) {
	if l.tripped.Load() {
		return 0, l.err
	}
	n, err := l.r.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			l.line = 0
			continue
		}
		l.line++
		if l.line > l.limit {
			l.tripped.Store(true)
			l.trip()
			return 0, l.err
		}
	}
	return n, err
}

// tooLarge is the error of a response over c's limit.
func (c *Client) tooLarge() error {
	return &ResponseTooLargeError{Server: c.server, Limit: c.limit}
}
