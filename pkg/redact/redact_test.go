package redact_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/redact"
)

func TestURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://host/mcp":                               "https://host/mcp",
		"https://host/mcp?api_key=k1&x=2":                "https://host/mcp",
		"https://user:pass@host:8443/p/q?token=t#frag":   "https://host:8443/p/q",
		"https://tok@host":                               "https://host",
		"http://a@b@host/x":                              "http://host/x",
		"https://host?k=v":                               "https://host",
		"https://host#access_token=v":                    "https://host",
		"https://%zz:p@host/%zz?q=1":                     "https://host/%zz", // does not parse
		"not a url":                                      "not a url",
		"nats://user:pw@127.0.0.1:4222":                  "nats://127.0.0.1:4222",
		"http://127.0.0.1:1/mcp/path@with-at?secret=xyz": "http://127.0.0.1:1/mcp/path@with-at",
	} {
		if got := redact.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestURLsInText(t *testing.T) {
	t.Parallel()
	// The shape of net/http's *url.Error, as mcp-go wraps it.
	_, err := http.Get("http://user:pw-S3KRET@127.0.0.1:1/mcp?api_key=S3KRET-key")
	if err == nil {
		t.Fatal("a request to port 1 succeeded")
	}
	msg := redact.URLs("failed to send request: " + err.Error())
	if strings.Contains(msg, "S3KRET") || strings.Contains(msg, "user") || !strings.Contains(msg, `"http://127.0.0.1:1/mcp"`) {
		t.Errorf("URLs = %q", msg)
	}
	if got := redact.URLs(`see <https://h/x?a=b> and 'ftp://u:p@h' then "wss://h/s?t=1".`); got != `see <https://h/x> and 'ftp://h' then "wss://h/s".` {
		t.Errorf("URLs = %q", got)
	}
}

func TestURLSecrets(t *testing.T) {
	t.Parallel()
	got := redact.URLSecrets("https://alice:pa%20ss@host/p?api_key=k%2B1&flag=&x=y")
	for _, want := range []string{"alice", "pa ss", "YWxpY2U6cGEgc3M=", "k+1", "k%2B1", "y"} {
		if !strings.Contains(strings.Join(got, "\n"), want) {
			t.Errorf("URLSecrets lacks %q: %q", want, got)
		}
	}
	if redact.URLSecrets("https://host/p") != nil {
		t.Errorf("a URL without secrets has some")
	}
}

func TestRedactorString(t *testing.T) {
	t.Parallel()
	r := redact.New("sek-1234", "abc", "sek-1234-long", "a b/c\"d")
	for in, want := range map[string]string{
		"token sek-1234 and sek-1234-long":       "token *** and ***",
		"short abc stays":                        "short abc stays",
		"escaped a+b%2Fc%22d and a%20b%2Fc%22d":  "escaped *** and ***",
		`json {"v":"a b/c\"d"}`:                  `json {"v":"***"}`,
		"url https://h/x?k=sek-1234 and no more": "url https://h/x and no more",
	} {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	var none *redact.Redactor
	if got := none.String("x https://u:p@h/?q=1"); got != "x https://h/" {
		t.Errorf("nil redactor: %q", got)
	}
	if r2 := r.With("more-secret"); r2.String("more-secret sek-1234") != "*** ***" || r.String("more-secret") != "more-secret" {
		t.Errorf("With changed the original or missed a value")
	}
}

func TestRedactorError(t *testing.T) {
	t.Parallel()
	base := errors.New("bad token Bearer abc123 for acme")
	r := redact.New("Bearer abc123", "acme", "x")
	err := r.Error(fmt.Errorf("wrapped: %w", base))
	if got := err.Error(); got != "wrapped: bad token *** for ***" {
		t.Errorf("redacted = %q", got)
	}
	if !errors.Is(err, base) {
		t.Errorf("redacted error does not unwrap to the cause")
	}
	if e := r.Error(errors.New("nothing here")); e.Error() != "nothing here" {
		t.Errorf("clean error changed: %v", e)
	}
	if r.Error(nil) != nil {
		t.Errorf("nil error became non-nil")
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	r := redact.New("env-S3KRET")
	log := redact.Logger(slog.New(slog.NewTextHandler(&buf, nil)), r).With("pre", "env-S3KRET")
	log.Info("line env-S3KRET", "line", "printed env-S3KRET", "err", errors.New("Post \"https://h/?k=q-S3KRET\": refused"),
		slog.Group("g", "inner", "env-S3KRET"), "n", 3)
	out := buf.String()
	if strings.Contains(out, "S3KRET") {
		t.Errorf("the log leaks: %s", out)
	}
	if strings.Count(out, "***") != 4 || !strings.Contains(out, "https://h/") || !strings.Contains(out, "n=3") {
		t.Errorf("the log lost its content: %s", out)
	}
}

// A tool result that reflects a secret has it masked in every JSON string
// (keys too, escaped spellings too); the rest of the JSON is untouched,
// short values are left alone and a result without a secret is returned
// as it came.
func TestJSONRedactsResults(t *testing.T) {
	r := redact.ForResults("Bearer tok-1234567", "sk-live-abcdef", "short")
	for _, c := range []struct{ in, want string }{
		{`{"type":"text","text":"auth: Bearer tok-1234567"}`, `{"type":"text","text":"auth: ***"}`},
		{`{"headers":{"Authorization":"Bearer tok-1234567"},"n":1.50,"k":"short"}`, `{"headers":{"Authorization":"***"},"n":1.50,"k":"short"}`},
		{`{"sk-live-abcdef":true, "list":["a","x sk-live-abcdef y"]}`, `{"***":true, "list":["a","x *** y"]}`},
		{`{"q":"say \"sk-live-abcdef\" <b>"}`, `{"q":"say \"***\" <b>"}`},
		{`{"nothing":"here"}`, `{"nothing":"here"}`},
	} {
		if got := string(r.JSON([]byte(c.in))); got != c.want {
			t.Errorf("JSON(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	if redact.ForResults("short", "1234567") != nil {
		t.Error("ForResults of values under MinResultLen is not nil")
	}
	var none *redact.Redactor
	if got := string(none.JSON([]byte(`{"a":"Bearer tok-1234567"}`))); got != `{"a":"Bearer tok-1234567"}` {
		t.Errorf("a nil Redactor changed the result: %s", got)
	}
}
