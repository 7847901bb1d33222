package mcpclient

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"

	"github.com/mcpbus/mcpbus/pkg/redact"
)

const (
	// stderrTail is how many recent stderr bytes Client.Stderr keeps.
	stderrTail = 16 << 10
	// maxStderrLine caps one logged line; longer lines are logged in pieces.
	maxStderrLine = 4 << 10
)

// stderrSink receives a stdio child's stderr (mirrored by mcp-go's drain
// goroutine), redacts it line by line, logs each line at Debug and keeps the
// tail. Lines are redacted whole, before they are logged or kept, so a
// secret split across writes is still found and the tail never starts with
// the second half of one.
type stderrSink struct {
	logger   *slog.Logger
	redactor *redact.Redactor

	mu      sync.Mutex
	partial []byte // the current unterminated line, not redacted yet
	tail    []byte // redacted complete lines, each ending in '\n'
}

func newStderrSink(logger *slog.Logger, r *redact.Redactor) *stderrSink {
	return &stderrSink{logger: logger, redactor: r}
}

// Write never fails and never blocks on anything but the logger.
func (s *stderrSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	data := p
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			s.partial = append(s.partial, data...)
			for len(s.partial) >= maxStderrLine {
				s.log(s.partial[:maxStderrLine])
				s.partial = append(s.partial[:0], s.partial[maxStderrLine:]...)
			}
			break
		}
		s.partial = append(s.partial, data[:i]...)
		s.log(s.partial)
		s.partial = s.partial[:0]
		data = data[i+1:]
	}
	return len(p), nil
}

// flush logs an unterminated last line.
func (s *stderrSink) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.log(s.partial)
		s.partial = s.partial[:0]
	}
}

// log redacts one line, keeps it in the tail and logs it. Upstream stderr is
// text the gateway does not control, so it is logged at Debug: operators
// who want every line turn that level on; a failed start reports the tail
// (StderrTail) where it is needed.
func (s *stderrSink) log(raw []byte) {
	line := s.redactor.String(string(bytes.TrimRight(raw, "\r")))
	s.keep(line)
	if line == "" {
		return
	}
	s.logger.LogAttrs(context.Background(), slog.LevelDebug, "mcp server stderr", slog.String("line", line))
}

// keep appends a redacted line to the tail, dropping its oldest bytes.
func (s *stderrSink) keep(line string) {
	s.tail = append(append(s.tail, line...), '\n')
	if over := len(s.tail) - stderrTail; over > 0 {
		s.tail = append(s.tail[:0], s.tail[over:]...)
	}
}

// snapshot is the tail plus the redacted unterminated line, at most
// stderrTail bytes.
func (s *stderrSink) snapshot() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append(bytes.Clone(s.tail), s.redactor.String(string(s.partial))...)
	if over := len(out) - stderrTail; over > 0 {
		out = out[over:]
	}
	return out
}

// lastLines returns at most n bytes from the end of the kept tail, starting
// at a line boundary when possible, on one line ("a | b").
func (s *stderrSink) lastLines(n int) string {
	tail := bytes.TrimSpace(s.snapshot())
	if len(tail) > n {
		tail = tail[len(tail)-n:]
		if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)-1 {
			tail = tail[i+1:]
		}
	}
	lines := strings.FieldsFunc(string(tail), func(r rune) bool { return r == '\n' || r == '\r' })
	return strings.Join(lines, " | ")
}

// String returns the kept tail.
func (s *stderrSink) String() string { return string(s.snapshot()) }
