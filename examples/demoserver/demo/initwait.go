package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// InitWait holds back a client's handshake (initialize, or the
// 2026-07-28 era's server/discover), so a test or an operator can play an
// upstream that is slow to start (an npx server fetching its package,
// say): the request is handled once Delay has passed since it arrived and,
// when Gate is set, once the file Gate exists. Everything else passes at
// once. The zero value holds back nothing.
type InitWait struct {
	Delay time.Duration
	Gate  string
}

// gatePoll is how often a held initialize looks for the gate file.
const gatePoll = 50 * time.Millisecond

// active reports whether w holds anything back.
func (w InitWait) active() bool { return w.Delay > 0 || w.Gate != "" }

// wait blocks as w says.
func (w InitWait) wait() {
	if w.Delay > 0 {
		time.Sleep(w.Delay)
	}
	for w.Gate != "" {
		if _, err := os.Stat(w.Gate); err == nil {
			return
		}
		time.Sleep(gatePoll)
	}
}

// isHandshake reports whether msg is a JSON-RPC initialize or
// server/discover request.
func isHandshake(msg []byte) bool {
	var m struct {
		Method mcp.MCPMethod `json:"method"`
	}
	return json.Unmarshal(bytes.TrimSpace(msg), &m) == nil && (m.Method == mcp.MethodInitialize || m.Method == mcp.MethodServerDiscover)
}

// Reader returns in with every handshake line held back as w says (the
// stdio transport: one JSON-RPC message per line).
func (w InitWait) Reader(in io.Reader) io.Reader {
	if !w.active() {
		return in
	}
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReader(in)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				if isHandshake(line) {
					w.wait()
				}
				if _, werr := pw.Write(line); werr != nil {
					return
				}
			}
			if err != nil {
				_ = pw.CloseWithError(err)
				return
			}
		}
	}()
	return pr
}

// Wrap returns next with every handshake POST held back as w says (the
// streamable HTTP transport).
func (w InitWait) Wrap(next http.Handler) http.Handler {
	if !w.active() {
		return next
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(rw, "cannot read body", http.StatusBadRequest)
				return
			}
			if isHandshake(body) {
				w.wait()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(rw, r)
	})
}
