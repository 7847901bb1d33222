package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The lean load generator: a minimal JSON-RPC-over-HTTP MCP client, the
// way gateways are load-tested (wrk-style), so the client's own CPU
// weighs little in a row. It keeps a connection per caller alive, sends
// request bodies encoded once (only the id changes), initializes one
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

// leanHTTP is the generator's HTTP client: a keep-alive connection per
// caller, no compression.
func leanHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * benchCallers, MaxIdleConns: 4 * benchCallers,
		IdleConnTimeout: time.Minute, DisableCompression: true, ForceAttemptHTTP2: false}}
}

// leanBody is a tools/call request encoded once around its id.
type leanBody struct{ prefix, suffix []byte }

func newLeanBody(tool string) leanBody {
	return leanBody{prefix: []byte(`{"jsonrpc":"2.0","id":`),
		suffix: []byte(`,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"message":"ping"}}}`)}
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
	case r.Result.IsError || len(r.Result.Content) == 0:
		return errors.New("isError or no content")
	}
	return nil
}

// leanStreamable is the generator over streamable HTTP (/mcp): each call
// a POST answered with JSON.
type leanStreamable struct {
	hc      *http.Client
	url     string
	session string
	body    leanBody
	next    atomic.Int64
}

func newLeanStreamable(ctx context.Context, rawURL, tool string) (*leanStreamable, error) {
	l := &leanStreamable{hc: leanHTTP(), url: rawURL, body: newLeanBody(tool)}
	resp, err := l.post(ctx, []byte(leanInitialize))
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		return nil, fmt.Errorf("initialize: status %d, session %q", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
	}
	l.session = resp.Header.Get("Mcp-Session-Id")
	if resp, err = l.post(ctx, []byte(leanInitialized)); err != nil {
		return nil, fmt.Errorf("initialized: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return l, nil
}

func (l *leanStreamable) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if l.session != "" {
		req.Header.Set("Mcp-Session-Id", l.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return l.hc.Do(req)
}

func (l *leanStreamable) call(ctx context.Context) error {
	resp, err := l.post(ctx, l.body.with(l.next.Add(1)))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return fmt.Errorf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	var r leanReply
	if err := json.Unmarshal(raw, &r); err != nil {
		return err
	}
	return checkLeanReply(r)
}

func (l *leanStreamable) close() { l.hc.CloseIdleConnections() }

// leanSSE is the generator over the legacy HTTP+SSE transport: one GET
// stream per session, a POST to the endpoint it names per message, the
// replies read off the stream and matched by id.
type leanSSE struct {
	hc       *http.Client
	endpoint string
	body     leanBody
	next     atomic.Int64
	stream   io.Closer
	mu       sync.Mutex
	pending  map[string]chan leanReply
	done     chan struct{}
	err      error // set before done closes
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
	l.endpoint = ep.String()
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
				return cmpOr(name, "message"), data, nil
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

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := l.hc.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post: status %d", resp.StatusCode)
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
}
