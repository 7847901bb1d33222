package mcphttp

import (
	"bytes"
	"fmt"
	"net/http"
	"time"
)

// sseWriter writes server-sent events and flushes each.
type sseWriter struct {
	w http.ResponseWriter
	f http.Flusher
}

// startSSE sends the stream's headers.
func startSSE(w http.ResponseWriter) (*sseWriter, bool) {
	f, ok := w.(http.Flusher)
	if !ok {
		writeHTTPError(w, http.StatusInternalServerError, "streaming is not supported here")
		return nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	f.Flush()
	return &sseWriter{w: w, f: f}, true
}

// event writes one event; data must not contain a newline (JSON does not).
func (s *sseWriter) event(name string, data []byte) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", name, data)
	return s.write(b.Bytes())
}

func (s *sseWriter) comment(text string) error { return s.write([]byte(": " + text + "\n\n")) }

// retry advertises how long a client should wait before reconnecting.
func (s *sseWriter) retry(d time.Duration) {
	_ = s.write(fmt.Appendf(nil, "retry: %d\n\n", d.Milliseconds()))
}

func (s *sseWriter) write(b []byte) error {
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	s.f.Flush()
	return nil
}
