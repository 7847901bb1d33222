package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
)

func TestIsSessionExpired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("transport error: %w", transport.ErrSessionTerminated), true},
		{errors.New("request failed with status 404: Session not found"), true},
		{errors.New("Bad Request: No valid session ID provided"), true},
		{errors.New("Invalid session ID"), true},
		{errors.New("Session not found"), true},
		{errors.New("unknown session abc"), true},
		{errors.New("Session expired"), true},
		{errors.New("Invalid request"), false},
		{errors.New("invalid params: session_id is required"), false},
		{errors.New("request failed with status 500: boom"), false},
	} {
		if got := isSessionExpired(tc.err); got != tc.want {
			t.Errorf("isSessionExpired(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestRedact(t *testing.T) {
	t.Parallel()
	base := errors.New("bad token Bearer abc123 for acme")
	err := redact(fmt.Errorf("wrapped: %w", base), []string{"Bearer abc123", "acme", "x"})
	if got := err.Error(); got != "wrapped: bad token [redacted] for [redacted]" {
		t.Errorf("redacted = %q", got)
	}
	if !errors.Is(err, base) {
		t.Errorf("redacted error does not unwrap to the cause")
	}
	if e := redact(base, nil); e != base {
		t.Errorf("redact without secrets changed the error")
	}
}

func TestValidateHeaders(t *testing.T) {
	t.Parallel()
	for h, ok := range map[[2]string]bool{
		{"X-Tenant", "acme"}:       true,
		{"Authorization", "B a\t"}: false,
		{"X-A", "a\r\nb"}:          false,
		{"X-A", "caf\u00e9"}:       false,
		{"Bad Name", "val1"}:       false,
		{"", "val1"}:               false,
	} {
		err := validateHeaders(map[string]string{h[0]: h[1]})
		if (err == nil) != ok {
			t.Errorf("validateHeaders(%q: %q) = %v, want ok=%v", h[0], h[1], err, ok)
		}
		if err != nil && h[1] != "" && strings.Contains(err.Error(), h[1]) {
			t.Errorf("error %q repeats the value", err)
		}
	}
}

func TestStderrSink(t *testing.T) {
	t.Parallel()
	var logged []string
	h := &captureHandler{lines: &logged}
	s := newStderrSink(slog.New(h))
	s.Write([]byte("one\ntw"))
	s.Write([]byte("o\r\n\nthree"))
	if want := []string{"one", "two"}; strings.Join(logged, ",") != strings.Join(want, ",") {
		t.Errorf("logged %q, want %q", logged, want)
	}
	s.flush()
	if len(logged) != 3 || logged[2] != "three" {
		t.Errorf("after flush logged %q", logged)
	}
	if got := s.lastLines(9); got != "three" {
		t.Errorf("lastLines(9) = %q", got)
	}
	if got := s.lastLines(100); got != "one | two | three" {
		t.Errorf("lastLines(100) = %q", got)
	}
	s.Write([]byte(strings.Repeat("x", 2*stderrTail)))
	if got := len(s.String()); got != stderrTail {
		t.Errorf("tail length = %d, want %d", got, stderrTail)
	}
}

type captureHandler struct {
	slog.Handler
	lines *[]string
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "line" {
			*h.lines = append(*h.lines, a.Value.String())
		}
		return true
	})
	return nil
}
