package mcpclient

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/mcpbus/mcpbus/pkg/redact"
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
	s := newStderrSink(slog.New(h), redact.New("env-S3KRET"))
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
	// A secret split across writes is redacted in the log and the tail,
	// and so is a URL's query string.
	s.Write([]byte("token env-S3"))
	s.Write([]byte("KRET at https://h/mcp?api_key=k\nlast env-S3KR"))
	if got := logged[len(logged)-1]; got != "token *** at https://h/mcp" {
		t.Errorf("logged %q", got)
	}
	if got := s.String(); strings.Contains(got, "S3KRET") || strings.Contains(got, "api_key") || !strings.HasSuffix(got, "last env-S3KR") {
		t.Errorf("tail = %q", got)
	}
	s.Write([]byte("ET\n"))
	if got := s.lastLines(100); strings.Contains(got, "S3KRET") || !strings.HasSuffix(got, "last ***") {
		t.Errorf("lastLines = %q", got)
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
