package configedit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestURLAndArgsMaskedAndRestored(t *testing.T) {
	t.Parallel()
	stored := json.RawMessage(`{"type":"http","url":"https://u:sek-pw@mcp.example/mcp?api_key=sek-q","oauth":{"token_url":"https://auth.example/t?k=sek-tq"},
		"command":"npx","args":["mcp-remote","--token","sek-arg","--api-key=sek-arg2"]}`)
	masked, err := MaskServerEntry(stored)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(masked), "sek-") {
		t.Fatalf("masked entry shows a secret: %s", masked)
	}
	// Writing the masked view back keeps every stored secret.
	merged, err := MergeServerEntry("x", stored, masked)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, merged, string(stored))
	// A changed path keeps the masked query and userinfo; a changed host does not.
	merged, err = MergeServerEntry("x", stored, json.RawMessage(`{"type":"http","url":"https://***@mcp.example/v2?***"}`))
	if err != nil {
		t.Fatal(err)
	}
	if u := decodeMap(t, merged)["url"]; u != "https://u:sek-pw@mcp.example/v2?api_key=sek-q" {
		t.Fatalf("path edit: url = %v", u)
	}
	for _, body := range []string{
		`{"type":"http","url":"https://mcp.evil.example/mcp?***"}`,
		`{"type":"http","url":"http://***@mcp.example/mcp"}`,
		`{"command":"npx","args":["mcp-remote","--api-key=***"]}`,
		`{"type":"http","url":"https://mcp.example/mcp#***"}`,
	} {
		_, err := MergeServerEntry("x", stored, json.RawMessage(body))
		var ee *EditError
		if !errors.As(err, &ee) || ee.Kind != EditInvalid || !strings.Contains(ee.Message, "masked secret placeholder") {
			t.Errorf("%s: %v", body, err)
		}
	}
	// A new server cannot hold a placeholder.
	for body, field := range map[string]string{
		`{"type":"http","url":"https://mcp.example/mcp?***"}`:                                 "url",
		`{"type":"http","url":"https://a/","oauth":{"token_url":"https://***@auth.example"}}`: "oauth.token_url",
		`{"command":"npx","args":["x","--token","***"]}`:                                      "args[2]",
	} {
		_, err := MergeServerEntry("x", nil, json.RawMessage(body))
		var ee *EditError
		if !errors.As(err, &ee) || ee.Field != field {
			t.Errorf("new %s: %v, want field %s", body, err, field)
		}
	}
}

func decodeMap(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCheckEntryValues(t *testing.T) {
	t.Parallel()
	for body, field := range map[string]string{
		`{"type":"http","url":"https://a/","headers":{"X-Foo":"sek-v\r\nX-Injected: 1"}}`:        "headers.X-Foo",
		`{"type":"http","url":"https://a/","headers":{"X-Foo":" sek-v"}}`:                        "headers.X-Foo",
		`{"type":"http","url":"https://a/","headers":{"X-Foo":"sek-é"}}`:                         "headers.X-Foo",
		`{"type":"http","url":"https://a/","headers":{"Authorization: Bearer sek-n":"x"}}`:       "headers",
		`{"type":"http","url":"https://a/","headers_from_context":{"headers":{"Bad Name":"k"}}}`: "headers_from_context.headers",
		`{"type":"http","url":"https://a/","user_auth":{"header":"X:Y","users":{}}}`:             "user_auth.header",
		`{"type":"http","url":"https://a/","user_auth":{"users":{"alice":"sek-u\n"}}}`:           "user_auth.users.alice",
		`{"type":"http","url":"file:///etc/passwd"}`:                                             "url",
		`{"type":"sse","url":"gopher://a/"}`:                                                     "url",
		`{"type":"http","url":"https:///nohost"}`:                                                "url",
		`{"type":"http","url":"mcp.example/x"}`:                                                  "url",
		`{"type":"http","url":"https://a/","oauth":{"token_url":"file:///etc/shadow"}}`:          "oauth.token_url",
	} {
		err := CheckEntryValues("x", json.RawMessage(body))
		var ee *EditError
		if !errors.As(err, &ee) || ee.Kind != EditInvalid || ee.Field != field || ee.Server != "x" {
			t.Errorf("%s: %v, want field %s", body, err, field)
			continue
		}
		if strings.Contains(ee.Message, "sek-") || strings.Contains(ee.Message, "passwd") {
			t.Errorf("%s: the message echoes the value: %s", body, ee.Message)
		}
	}
	for _, body := range []string{
		`{"type":"http","url":"https://a.example:8443/mcp?x=1","headers":{"Authorization":"Bearer a\tb"}}`,
		`{"type":"http","url":"$REMOTE_URL","headers":{"X-Key":"$KEY"}}`,
		`{"command":"npx","args":["file:///x"]}`,
		`{"type":"http","url":"http://a/","oauth":{"token_url":"$TOKEN_URL","extra_token_params":{"p":"a\nb"}}}`,
	} {
		if err := CheckEntryValues("x", json.RawMessage(body)); err != nil {
			t.Errorf("%s: %v", body, err)
		}
	}
}
