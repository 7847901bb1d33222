package config

import (
	"slices"
	"testing"
)

func TestSecretValuesAfterExpansion(t *testing.T) {
	t.Setenv("CFG_TEST_TOKEN", "env-from-var-1")
	ext := parse(t, `{"mcpServers": {
		"s": {"command": "x", "env": {"A": "$CFG_TEST_TOKEN", "B": "lit-env-2"},
			"args": ["--api-key=arg-10", "--token", "arg-11", "https://au:ap-12@h/x?k=aq-13", "plain-arg"]},
		"h": {"type": "http", "url": "https://usr:pw-3@h/mcp?api_key=q-4",
			"headers": {"X-K": "hdr-5"}, "user_auth": {"enabled": true, "users": {"alice": "ua-6"}},
			"oauth": {"enabled": true, "token_url": "https://t/tok?tenant=tq-7", "client_id": "id", "client_secret": "cs-8",
				"extra_token_params": {"p": "ep-9"}}}
	}}`)
	got := append(ext.Server("s").SecretValues(), ext.Server("h").SecretValues()...)
	for _, want := range []string{"env-from-var-1", "lit-env-2", "usr", "pw-3", "q-4", "hdr-5", "ua-6", "tq-7", "cs-8", "ep-9", "arg-10", "arg-11", "ap-12", "aq-13"} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretValues lacks %q: %q", want, got)
		}
	}
	if slices.Contains(got, "$CFG_TEST_TOKEN") || slices.Contains(got, "plain-arg") || slices.Contains(got, "--token") {
		t.Errorf("SecretValues has a placeholder or a plain argument: %q", got)
	}
	if r := ext.Server("h").Redactor(); r.String("cs-8 at https://t/tok?tenant=tq-7") != "*** at https://t/tok" {
		t.Errorf("Redactor: %q", r.String("cs-8 at https://t/tok?tenant=tq-7"))
	}
}
