package main_test

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The lean load generator: a minimal JSON-RPC-over-HTTP MCP client, the
// way gateways are load-tested (wrk-style), so the client's own CPU
// weighs little in a row. It writes HTTP/1.1 requests itself on
// keep-alive connections (one per caller, rawPoster), sends request
// bodies encoded once (only the id changes), initializes one
// session per row (as one mcp-go client does: supergateway broadcasts its
// child's output to every open SSE session, so a session per caller would
// multiply its work) and checks each reply with one small decode. The same
// generator drives every row it appears in: /mcp (streamable HTTP), /sse
// of mcpbus and of both npm gateways (legacy HTTP+SSE: one GET stream,
// POST to the endpoint it names, replies matched by id).

// leanClient calls one tool over one MCP session.
type leanClient interface {
	// call makes one tools/call and checks its result.
	call(ctx context.Context) error
	close()
}

// leanHTTP is the HTTP client of the SSE GET streams.
func leanHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableCompression: true}}
}

// rawPoster POSTs JSON bodies to one URL over HTTP/1.1 connections it
// writes and reads itself (a keep-alive connection per concurrent caller,
// reused), the way wrk does: the request head is built once, a response
// is its status, the headers the generator reads and its body
// (Content-Length or chunked).
type rawPoster struct {
	addr string
	head []byte // up to and including "Content-Length: "
	idle chan *rawConn
}

type rawConn struct {
	c   net.Conn
	r   *bufio.Reader
	buf []byte
}

type rawResponse struct {
	status                 int
	contentType, sessionID string
	body                   []byte
}

func newRawPoster(addr, path, headers string) *rawPoster {
	head := "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n" + headers + "Content-Length: "
	return &rawPoster{addr: addr, head: []byte(head), idle: make(chan *rawConn, 4*benchCallers)}
}

// post sends body on an idle connection, or a new one. An idle connection
// the server closed meanwhile (Node closes keep-alive connections idle for
// 5s) fails before any byte of a response: the request is sent again on a
// new connection, as net/http's client does.
func (p *rawPoster) post(ctx context.Context, body []byte) (rawResponse, error) {
	select {
	case rc := <-p.idle:
		resp, err := p.send(ctx, rc, body)
		if !errors.Is(err, errStale) {
			return resp, err
		}
	default:
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return rawResponse{}, err
	}
	return p.send(ctx, &rawConn{c: c, r: bufio.NewReaderSize(c, 16<<10)}, body)
}

// errStale is a reused connection that ended before a response began.
var errStale = errors.New("connection closed before the response")

func (p *rawPoster) send(ctx context.Context, rc *rawConn, body []byte) (rawResponse, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = rc.c.SetDeadline(dl)
	}
	b := append(rc.buf[:0], p.head...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	rc.buf = b
	resp, keep, err := rc.roundTrip(b)
	if err != nil || !keep {
		_ = rc.c.Close()
		return resp, err
	}
	select {
	case p.idle <- rc:
	default:
		_ = rc.c.Close()
	}
	return resp, nil
}

// roundTrip writes req and reads the response; keep is false when the
// server closes the connection after it.
func (rc *rawConn) roundTrip(req []byte) (resp rawResponse, keep bool, err error) {
	if _, err := rc.c.Write(req); err != nil {
		return resp, false, fmt.Errorf("%w: %w", errStale, err)
	}
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		if len(line) == 0 {
			err = fmt.Errorf("%w: %w", errStale, err)
		}
		return resp, false, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return resp, false, fmt.Errorf("bad status line %q", line)
	}
	resp.status, _ = strconv.Atoi(string(line[9:12]))
	length, chunked, keep := -1, false, true
	for {
		line, err := rc.r.ReadSlice('\n')
		if err != nil {
			return resp, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			length, _ = strconv.Atoi(string(value))
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
		case bytes.EqualFold(name, []byte("Content-Type")):
			resp.contentType = string(value)
		case bytes.EqualFold(name, []byte("Mcp-Session-Id")):
			resp.sessionID = string(value)
		case bytes.EqualFold(name, []byte("Connection")):
			keep = !bytes.EqualFold(value, []byte("close"))
		}
	}
	switch {
	case chunked:
		for {
			line, err := rc.r.ReadSlice('\n')
			if err != nil {
				return resp, false, err
			}
			size, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.SplitN(line, []byte(";"), 2)[0])), 16, 64)
			if err != nil {
				return resp, false, fmt.Errorf("bad chunk size %q", line)
			}
			if size == 0 {
				for { // trailers up to the blank line
					line, err := rc.r.ReadSlice('\n')
					if err != nil {
						return resp, false, err
					}
					if len(bytes.TrimRight(line, "\r\n")) == 0 {
						break
					}
				}
				return resp, keep, nil
			}
			start := len(resp.body)
			resp.body = append(resp.body, make([]byte, size)...)
			if _, err := io.ReadFull(rc.r, resp.body[start:]); err != nil {
				return resp, false, err
			}
			if _, err := rc.r.Discard(2); err != nil {
				return resp, false, err
			}
		}
	case length >= 0:
		resp.body = make([]byte, length)
		if _, err := io.ReadFull(rc.r, resp.body); err != nil {
			return resp, false, err
		}
		return resp, keep, nil
	default: // no length: the body runs to the end of the connection
		resp.body, err = io.ReadAll(rc.r)
		return resp, false, err
	}
}

func (p *rawPoster) close() {
	for {
		select {
		case rc := <-p.idle:
			_ = rc.c.Close()
		default:
			return
		}
	}
}

// leanBody is a tools/call request encoded once around its id.
type leanBody struct{ prefix, suffix []byte }

func newLeanBody(tool string) leanBody {
	return leanBody{prefix: []byte(`{"jsonrpc":"2.0","id":`),
		suffix: []byte(`,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"message":"ping"}}}`)}
}

// newLeanReadBody is a resources/read of uri encoded once around its id.
func newLeanReadBody(uri string) leanBody {
	return leanBody{prefix: []byte(`{"jsonrpc":"2.0","id":`),
		suffix: []byte(`,"method":"resources/read","params":{"uri":"` + uri + `"}}`)}
}

func (l leanBody) with(id int64) []byte {
	b := make([]byte, 0, len(l.prefix)+len(l.suffix)+20)
	b = append(b, l.prefix...)
	b = strconv.AppendInt(b, id, 10)
	return append(b, l.suffix...)
}

const leanInitialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
	`"capabilities":{},"clientInfo":{"name":"bench-lean","version":"1"}}}`

const leanInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

// leanReply is what the generator reads of a response: its id, and
// whether the call succeeded with content.
type leanReply struct {
	ID     json.RawMessage `json:"id"`
	Result *struct {
		IsError bool              `json:"isError"`
		Content []json.RawMessage `json:"content"`
		// Contents is a resources/read's.
		Contents []json.RawMessage `json:"contents"`
	} `json:"result"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

func checkLeanReply(r leanReply) error {
	switch {
	case r.Error != nil:
		return fmt.Errorf("json-rpc error: %s", r.Error.Message)
	case r.Result == nil:
		return errors.New("no result")
	case r.Result.IsError || len(r.Result.Content)+len(r.Result.Contents) == 0:
		return errors.New("isError or no content")
	}
	return nil
}

// leanStreamable is the generator over streamable HTTP (/mcp): each call
// a POST answered with JSON.
type leanStreamable struct {
	poster *rawPoster
	body   leanBody
	next   atomic.Int64
}

func newLeanStreamable(ctx context.Context, rawURL, tool string) (*leanStreamable, error) {
	return newLeanStreamableBody(ctx, rawURL, newLeanBody(tool))
}

// newLeanStreamableBody is newLeanStreamable sending body (a tools/call
// or a resources/read).
func newLeanStreamableBody(ctx context.Context, rawURL string, body leanBody) (*leanStreamable, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	l := &leanStreamable{body: body}
	init := newRawPoster(u.Host, u.RequestURI(), "Accept: application/json, text/event-stream\r\n")
	resp, err := init.post(ctx, []byte(leanInitialize))
	init.close()
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if resp.status != http.StatusOK || resp.sessionID == "" {
		return nil, fmt.Errorf("initialize: status %d, session %q", resp.status, resp.sessionID)
	}
	l.poster = newRawPoster(u.Host, u.RequestURI(), "Accept: application/json, text/event-stream\r\nMcp-Session-Id: "+resp.sessionID+
		"\r\nMcp-Protocol-Version: 2025-11-25\r\n")
	if resp, err = l.poster.post(ctx, []byte(leanInitialized)); err != nil || resp.status/100 != 2 {
		return nil, fmt.Errorf("initialized: status %d, %v", resp.status, err)
	}
	return l, nil
}

func (l *leanStreamable) call(ctx context.Context) error {
	resp, err := l.poster.post(ctx, l.body.with(l.next.Add(1)))
	if err != nil {
		return err
	}
	body := resp.body
	switch {
	case resp.status != http.StatusOK:
		return fmt.Errorf("status %d, %s: %s", resp.status, resp.contentType, resp.body)
	case strings.HasPrefix(resp.contentType, "text/event-stream"):
		// The npm gateways' streamable HTTP answers a POST with a stream
		// holding the response: its data line that is a message (mcp-proxy
		// sends an empty priming event first).
		body = nil
		for line := range bytes.Lines(resp.body) {
			if data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: ")); ok && len(data) > 0 && data[0] == '{' {
				body = data
			}
		}
		if body == nil {
			return fmt.Errorf("an event stream without a message: %s", resp.body)
		}
	case !strings.HasPrefix(resp.contentType, "application/json"):
		return fmt.Errorf("status %d, %s: %s", resp.status, resp.contentType, resp.body)
	}
	var r leanReply
	if err := json.Unmarshal(body, &r); err != nil {
		return err
	}
	return checkLeanReply(r)
}

func (l *leanStreamable) close() { l.poster.close() }

// leanSSE is the generator over the legacy HTTP+SSE transport: one GET
// stream per session, a POST to the endpoint it names per message, the
// replies read off the stream and matched by id.
type leanSSE struct {
	hc      *http.Client // the GET stream
	poster  *rawPoster
	body    leanBody
	next    atomic.Int64
	stream  io.Closer
	mu      sync.Mutex
	pending map[string]chan leanReply
	done    chan struct{}
	err     error // set before done closes
}

func newLeanSSE(ctx context.Context, sseURL, tool string) (*leanSSE, error) {
	l := &leanSSE{hc: leanHTTP(), body: newLeanBody(tool), pending: map[string]chan leanReply{}, done: make(chan struct{})}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, sseURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := l.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sse stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("sse stream: status %d", resp.StatusCode)
	}
	l.stream = resp.Body
	events := bufio.NewReaderSize(resp.Body, 64<<10)
	name, data, err := readSSEEvent(events)
	if err != nil || name != "endpoint" {
		resp.Body.Close()
		return nil, fmt.Errorf("sse stream: first event %q (%v), want endpoint", name, err)
	}
	base, _ := url.Parse(sseURL)
	ep, err := base.Parse(strings.TrimSpace(string(data)))
	if err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("sse endpoint %q: %w", data, err)
	}
	l.poster = newRawPoster(ep.Host, ep.RequestURI(), "")
	go l.read(events)
	if _, err := l.roundTrip(ctx, "0", []byte(leanInitialize)); err != nil {
		l.close()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if err := l.post(ctx, []byte(leanInitialized)); err != nil {
		l.close()
		return nil, fmt.Errorf("initialized: %w", err)
	}
	return l, nil
}

// readSSEEvent reads one event (its name and data lines joined), skipping
// comments.
func readSSEEvent(r *bufio.Reader) (name string, data []byte, err error) {
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return "", nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			if name != "" || data != nil {
				return cmp.Or(name, "message"), data, nil
			}
		case line[0] == ':':
		case bytes.HasPrefix(line, []byte("event:")):
			name = string(bytes.TrimSpace(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			d := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, d...)
		}
	}
}

// read delivers the stream's replies to their callers until it ends.
func (l *leanSSE) read(events *bufio.Reader) {
	var err error
	for {
		var data []byte
		if _, data, err = readSSEEvent(events); err != nil {
			break
		}
		var r leanReply
		if json.Unmarshal(data, &r) != nil || len(r.ID) == 0 {
			continue // a notification, or not a reply
		}
		l.mu.Lock()
		ch := l.pending[string(r.ID)]
		delete(l.pending, string(r.ID))
		l.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	l.err = fmt.Errorf("sse stream ended: %w", err)
	close(l.done)
}

func (l *leanSSE) post(ctx context.Context, body []byte) error {
	resp, err := l.poster.post(ctx, body)
	if err != nil {
		return err
	}
	if resp.status/100 != 2 {
		return fmt.Errorf("post: status %d", resp.status)
	}
	return nil
}

// roundTrip posts body (a request with id) and waits for its reply.
func (l *leanSSE) roundTrip(ctx context.Context, id string, body []byte) (leanReply, error) {
	ch := make(chan leanReply, 1)
	l.mu.Lock()
	l.pending[id] = ch
	l.mu.Unlock()
	forget := func() {
		l.mu.Lock()
		delete(l.pending, id)
		l.mu.Unlock()
	}
	if err := l.post(ctx, body); err != nil {
		forget()
		return leanReply{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-l.done:
		forget()
		return leanReply{}, l.err
	case <-ctx.Done():
		forget()
		return leanReply{}, ctx.Err()
	}
}

func (l *leanSSE) call(ctx context.Context) error {
	id := l.next.Add(1)
	r, err := l.roundTrip(ctx, strconv.FormatInt(id, 10), l.body.with(id))
	if err != nil {
		return err
	}
	return checkLeanReply(r)
}

func (l *leanSSE) close() {
	_ = l.stream.Close()
	l.hc.CloseIdleConnections()
	l.poster.close()
}
