package mcpclient

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
)

const (
	// stderrTail is how many recent stderr bytes Client.Stderr keeps.
	stderrTail = 16 << 10
	// maxStderrLine caps one logged line; longer lines are logged in pieces.
	maxStderrLine = 4 << 10
)

// stderrSink receives a stdio child's stderr (mirrored by mcp-go's drain
// goroutine), logs it line by line and keeps its tail.
type stderrSink struct {
	logger *slog.Logger

	mu      sync.Mutex
	partial []byte // the current unterminated line
	tail    []byte
}

func newStderrSink(logger *slog.Logger) *stderrSink {
	return &stderrSink{logger: logger}
}

// Write never fails and never blocks on anything but the logger.
func (s *stderrSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.tail = append(s.tail, p...)
	if over := len(s.tail) - stderrTail; over > 0 {
		s.tail = append(s.tail[:0], s.tail[over:]...)
	}

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

func (s *stderrSink) log(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) == 0 {
		return
	}
	s.logger.LogAttrs(context.Background(), slog.LevelInfo, "mcp server stderr", slog.String("line", string(line)))
}

// lastLines returns at most n bytes from the end of the kept tail, starting
// at a line boundary when possible, on one line ("a | b").
func (s *stderrSink) lastLines(n int) string {
	s.mu.Lock()
	tail := bytes.Clone(s.tail)
	s.mu.Unlock()
	tail = bytes.TrimSpace(tail)
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
func (s *stderrSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.tail)
}
