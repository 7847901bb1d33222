package configedit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

const storedFile = `{
  "skills": {"enabled": ["x"]},
  "mcpServers": {
    "stdio": {"command": "npx", "args": ["-y", "pkg"], "env": {"API_KEY": "real-key", "MODE": "$MODE"}, "routing": {"mode": "prefer", "priority": 5}, "tools": {"t": {"routing": {"mode": "off"}}}, "custom": {"password": "real-pw", "keep": 1}, "transport": "stdio"},
    "web": {"type": "http", "url": "http://u", "headers": {"Authorization": "Bearer real"}, "oauth": {"token_url": "http://t", "client_id": "id", "client_secret": "real-cs", "refresh_token": "real-rt", "extra_token_params": {"resource": "real-res"}}, "user_auth": {"enabled": true, "users": {"alice": "real-alice"}}},
    "gone": {"command": "uvx", "args": ["x"]}
  },
  "mcpInterceptors": ["a:b"]
}`

func editKind(t *testing.T, err error) (*EditError, EditErrorKind) {
	t.Helper()
	var ee *EditError
	if !errors.As(err, &ee) {
		t.Fatalf("error %v is not an *EditError", err)
	}
	return ee, ee.Kind
}

func TestReplaceServersRoundTripRestoresSecrets(t *testing.T) {
	t.Parallel()
	masked, err := MaskedServers([]byte(storedFile))
	if err != nil {
		t.Fatal(err)
	}
	out, err := ReplaceServers([]byte(storedFile), masked)
	if err != nil {
		t.Fatal(err)
	}
	// Everything but "gone" is what was stored; the round trip lost no secret.
	jsonEqual(t, out, `{
	  "skills": {"enabled": ["x"]},
	  "mcpServers": {
	    "stdio": {"command": "npx", "args": ["-y", "pkg"], "env": {"API_KEY": "real-key", "MODE": "$MODE"}, "routing": {"mode": "prefer", "priority": 5}, "tools": {"t": {"routing": {"mode": "off"}}}, "custom": {"password": "real-pw", "keep": 1}, "transport": "stdio"},
	    "web": {"type": "http", "url": "http://u", "headers": {"Authorization": "Bearer real"}, "oauth": {"token_url": "http://t", "client_id": "id", "client_secret": "real-cs", "refresh_token": "real-rt", "extra_token_params": {"resource": "real-res"}}, "user_auth": {"enabled": true, "users": {"alice": "real-alice"}}},
	    "gone": {"command": "uvx", "args": ["x"]}
	  },
	  "mcpInterceptors": ["a:b"]
	}`)
	if !strings.HasPrefix(string(out), "{\n  \"skills\"") || !strings.Contains(string(out), `"mcpInterceptors"`) {
		t.Fatalf("top-level order or keys not kept:\n%s", out)
	}
}

func TestReplaceServersRules(t *testing.T) {
	t.Parallel()
	out, err := ReplaceServers([]byte(storedFile), json.RawMessage(`{
	  "stdio": {"command": "npx", "args": ["-y", "pkg"], "env": {"API_KEY": "***", "NEW": "v"}, "custom": {"password": "***"}},
	  "web": {"type": "http", "url": "http://u", "headers": {"Authorization": "***"}, "oauth": {"token_url": "http://t", "client_id": "id2", "client_secret": "", "refresh_token": "new-rt"}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{
	  "skills": {"enabled": ["x"]},
	  "mcpServers": {
	    "stdio": {"command": "npx", "args": ["-y", "pkg"], "env": {"API_KEY": "real-key", "NEW": "v"}, "custom": {"password": "real-pw", "keep": 1}, "routing": {"mode": "prefer", "priority": 5}, "tools": {"t": {"routing": {"mode": "off"}}}},
	    "web": {"type": "http", "url": "http://u", "headers": {"Authorization": "Bearer real"}, "oauth": {"token_url": "http://t", "client_id": "id2", "refresh_token": "new-rt"}}
	  },
	  "mcpInterceptors": ["a:b"]
	}`)

	// A missing file is created from the body.
	out, err = ReplaceServers(nil, json.RawMessage(`{"n": {"command": "npx"}}`))
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"mcpServers": {"n": {"command": "npx"}}}`)
}

func TestReplaceServersRefusals(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		body string
		kind EditErrorKind
		msg  string
	}{
		"new env key masked":    {`{"stdio": {"command": "npx", "env": {"OTHER": "***"}}}`, EditInvalid, "Cannot set env key 'OTHER' to masked value '***'; provide a real value."},
		"new header masked":     {`{"web": {"type": "http", "url": "http://u", "headers": {"X-Key": "***"}}}`, EditInvalid, "Cannot set header 'X-Key' to masked value '***'; provide a real value."},
		"new extra masked":      {`{"stdio": {"command": "npx", "apiToken": "***"}}`, EditInvalid, "Cannot set extra config key 'apiToken' to masked value '***'; provide a real value."},
		"new nested extra":      {`{"stdio": {"command": "npx", "custom": {"secret": "***"}}}`, EditInvalid, "Cannot set extra config key 'secret'"},
		"oauth secret masked":   {`{"stdio": {"command": "npx", "oauth": {"token_url": "http://t", "client_secret": "***"}}}`, EditInvalid, "Cannot set oauth key 'client_secret'"},
		"extra_token_params":    {`{"web": {"type": "http", "url": "http://u", "oauth": {"token_url": "http://t", "extra_token_params": {"aud": "***"}}}}`, EditInvalid, "oauth.extra_token_params key 'aud'"},
		"user_auth users":       {`{"web": {"type": "http", "url": "http://u", "user_auth": {"users": {"bob": "***"}}}}`, EditInvalid, "user_auth.users key 'bob'"},
		"new server env":        {`{"fresh": {"command": "npx", "env": {"K": "***"}}}`, EditInvalid, "Cannot persist masked secret placeholder for MCP server 'fresh' field 'env.K'"},
		"new server header":     {`{"fresh": {"type": "http", "url": "http://u", "headers": {"Authorization": "***"}}}`, EditInvalid, "field 'headers.Authorization'"},
		"new server oauth":      {`{"fresh": {"type": "http", "url": "http://u", "oauth": {"refresh_token": "***"}}}`, EditInvalid, "field 'oauth.refresh_token'"},
		"new server extra list": {`{"fresh": {"command": "npx", "keys": [{"api_key": "***"}]}}`, EditInvalid, "field 'keys[0].api_key'"},
		"new server users":      {`{"fresh": {"type": "http", "url": "http://u", "user_auth": {"users": {"a": "***"}}}}`, EditInvalid, "field 'user_auth.users.a'"},
		"not an object":         {`[]`, EditSchema, "mcp_servers must be a JSON object"},
		"server not an object":  {`{"x": 1}`, EditSchema, "MCP server 'x' must be a JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReplaceServers([]byte(storedFile), json.RawMessage(tc.body))
			ee, kind := editKind(t, err)
			if kind != tc.kind || !strings.Contains(ee.Message, tc.msg) {
				t.Fatalf("got kind %d %q, want kind %d containing %q", kind, ee.Message, tc.kind, tc.msg)
			}
			for _, secret := range []string{"real-key", "real-pw", "real-cs", "real-rt", "real-res", "real-alice"} {
				if strings.Contains(ee.Message, secret) {
					t.Fatalf("the message shows a stored secret: %s", ee.Message)
				}
			}
		})
	}
}

func TestSetServerEnabled(t *testing.T) {
	t.Parallel()
	doc := `{"mcpServers": {"a": {"transport": "stdio", "command": "npx", "env": {"K": "v"}}, "b": {"command": "uvx"}}, "x": 1}`
	out, err := SetServerEnabled([]byte(doc), "a", false)
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{"mcpServers": {"a": {"transport": "stdio", "command": "npx", "env": {"K": "v"}, "enabled": false}, "b": {"command": "uvx"}}, "x": 1}`)
	if strings.Contains(string(out), `"type"`) {
		t.Fatalf("a type was added:\n%s", out)
	}
	for _, data := range []string{doc, ""} {
		_, err = SetServerEnabled([]byte(data), "missing", true)
		if ee, kind := editKind(t, err); kind != EditNotFound || ee.Message != "MCP server 'missing' not found" {
			t.Fatalf("unknown server: %v", err)
		}
	}
}

func TestMergeServerEntry(t *testing.T) {
	t.Parallel()
	stored := json.RawMessage(`{"type": "http", "url": "http://u", "headers": {"Authorization": "Bearer s"}}`)
	got, err := MergeServerEntry("p", stored, json.RawMessage(`{"type": "http", "url": "http://u/other/path", "headers": {"Authorization": "***"}}`))
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{"type": "http", "url": "http://u/other/path", "headers": {"Authorization": "Bearer s"}}`)
	_, err = MergeServerEntry("p", nil, json.RawMessage(`{"type": "http", "url": "http://v", "headers": {"Authorization": "***"}}`))
	if _, kind := editKind(t, err); kind != EditInvalid {
		t.Fatalf("new entry with a placeholder: %v", err)
	}
}
