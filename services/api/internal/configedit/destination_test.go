package configedit

import (
	"encoding/json"
	"strings"
	"testing"
)

// The read-back attack: an admin view shows "***"; an edit that moves the
// secret's destination (url to another host or port, token_url elsewhere,
// another command or args for env) but keeps "***" would send the stored
// secret to a place of the editor's choosing. Each is refused with 400
// naming the field, and no stored secret is in the message.
func TestMovedDestinationRefusesMaskedSecret(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ body, field string }{
		"header, url to another host":    {`{"web": {"type": "http", "url": "http://attacker.example", "headers": {"Authorization": "***"}}}`, "headers.Authorization"},
		"header, url to another port":    {`{"web": {"type": "http", "url": "http://u:8080", "headers": {"Authorization": "***"}}}`, "headers.Authorization"},
		"header, url to https":           {`{"web": {"type": "http", "url": "https://u", "headers": {"Authorization": "***"}}}`, "headers.Authorization"},
		"user_auth, url moved":           {`{"web": {"type": "http", "url": "http://attacker.example", "user_auth": {"enabled": true, "users": {"alice": "***"}}}}`, "user_auth.users.alice"},
		"oauth secret kept by ***":       {`{"web": {"type": "http", "url": "http://u", "oauth": {"token_url": "http://attacker.example/token", "client_id": "id", "client_secret": "***"}}}`, "oauth.client_secret"},
		"oauth secret kept by omission":  {`{"web": {"type": "http", "url": "http://u", "oauth": {"token_url": "http://attacker.example/token", "client_id": "id"}}}`, "oauth.client_secret"},
		"oauth extra param, token moved": {`{"web": {"type": "http", "url": "http://u", "oauth": {"token_url": "http://t:9", "client_secret": "", "refresh_token": "", "extra_token_params": {"resource": "***"}}}}`, "oauth.extra_token_params.resource"},
		"env, other command":             {`{"stdio": {"command": "sh", "args": ["-y", "pkg"], "env": {"API_KEY": "***"}}}`, "env.API_KEY"},
		"env, other args":                {`{"stdio": {"command": "npx", "args": ["-y", "evil-pkg"], "env": {"API_KEY": "***"}}}`, "env.API_KEY"},
		"env, args removed":              {`{"stdio": {"command": "npx", "env": {"API_KEY": "***"}}}`, "env.API_KEY"},
		"masked arg, other command":      {`{"tok": {"command": "sh", "args": ["--token", "***"]}}`, "args"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReplaceServers([]byte(destinationsFile), json.RawMessage(tc.body))
			ee, kind := editKind(t, err)
			if kind != EditInvalid || ee.Field != tc.field || !strings.Contains(ee.Message, "re-enter the secret: its destination changed") || !strings.Contains(ee.Message, tc.field) {
				t.Fatalf("got kind %d field %q %q, want EditInvalid naming %s", kind, ee.Field, ee.Message, tc.field)
			}
			for _, secret := range []string{"real-key", "real-cs", "real-rt", "real-res", "real-alice", "Bearer real", "tok-secret"} {
				if strings.Contains(ee.Message, secret) {
					t.Fatalf("the message shows a stored secret: %s", ee.Message)
				}
			}
		})
	}
}

// The same destination (another path, the default port spelled out, the
// masked view of the args) keeps the stored secrets.
func TestSameDestinationRestoresMaskedSecret(t *testing.T) {
	t.Parallel()
	out, err := ReplaceServers([]byte(destinationsFile), json.RawMessage(`{
	  "web": {"type": "http", "url": "http://U:80/v2", "headers": {"Authorization": "***"}, "user_auth": {"enabled": true, "users": {"alice": "***"}},
	    "oauth": {"token_url": "http://t/other", "client_id": "id", "extra_token_params": {"resource": "***"}}},
	  "stdio": {"command": "npx", "args": ["-y", "pkg"], "env": {"API_KEY": "***"}},
	  "tok": {"command": "npx", "args": ["--token", "***"]}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"real-key", "real-cs", "real-rt", "real-res", "real-alice", "Bearer real", "tok-secret-value"} {
		if !strings.Contains(string(out), secret) {
			t.Errorf("%s was not restored:\n%s", secret, out)
		}
	}
}

const destinationsFile = `{"mcpServers": {
  "stdio": {"command": "npx", "args": ["-y", "pkg"], "env": {"API_KEY": "real-key"}},
  "web": {"type": "http", "url": "http://u", "headers": {"Authorization": "Bearer real"}, "user_auth": {"enabled": true, "users": {"alice": "real-alice"}},
    "oauth": {"token_url": "http://t", "client_id": "id", "client_secret": "real-cs", "refresh_token": "real-rt", "extra_token_params": {"resource": "real-res"}}},
  "tok": {"command": "npx", "args": ["--token", "tok-secret-value"]}
}}`
