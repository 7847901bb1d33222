package configedit

import (
	"encoding/json"
	"reflect"
	"testing"
)

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got is not JSON: %v: %s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v: %s", err, want)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestMaskServerEntry(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ in, want string }{
		"env and headers": {
			`{"command":"npx","args":["--token","$ARG"],"env":{"API_KEY":"$KEY","PLAIN":"x"},"headers":{"Authorization":"Bearer s"}}`,
			`{"command":"npx","args":["--token","$ARG"],"env":{"API_KEY":"***","PLAIN":"***"},"headers":{"Authorization":"***"}}`},
		"oauth": {
			`{"type":"http","url":"http://u","oauth":{"token_url":"http://t","client_id":"id","client_secret":"cs","refresh_token":"rt","token_field":"access_token","extra_token_params":{"resource":"r","x":"y"},"assertionToken":"a"}}`,
			`{"type":"http","url":"http://u","oauth":{"token_url":"http://t","client_id":"id","client_secret":null,"refresh_token":null,"token_field":"access_token","extra_token_params":{"resource":"***","x":"***"},"assertionToken":"***"}}`},
		"user_auth and headers_from_context": {
			`{"type":"http","url":"http://u","user_auth":{"enabled":true,"header":"Authorization","users":{"alice":"Bearer a"}},"headers_from_context":{"enabled":true,"headers":{"Authorization":"user_token"}}}`,
			`{"type":"http","url":"http://u","user_auth":{"enabled":true,"header":"Authorization","users":{"alice":"***"}},"headers_from_context":{"enabled":true,"headers":{"Authorization":"user_token"}}}`},
		"extras at any depth": {
			`{"command":"npx","cwd":"/w","customFlag":true,"refreshToken":"r","nested":{"apiKey":"k","list":[{"password":"p","ok":1}],"deep":{"x":{"bearer":"b"}}}}`,
			`{"command":"npx","cwd":"/w","customFlag":true,"refreshToken":"***","nested":{"apiKey":"***","list":[{"password":"***","ok":1}],"deep":{"x":{"bearer":"***"}}}}`},
		"typed fields are not scanned": {
			`{"type":"http","url":"http://u","tools":{"get_token":{"routing":{"mode":"prefer"}}},"description":"token tool"}`,
			`{"type":"http","url":"http://u","tools":{"get_token":{"routing":{"mode":"prefer"}}},"description":"token tool"}`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := MaskServerEntry(json.RawMessage(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, got, tc.want)
		})
	}
}

func TestMaskedServersKeepsOrderAndPlaceholders(t *testing.T) {
	t.Parallel()
	got, err := MaskedServers([]byte(`{"skills":{"a":1},"mcpServers":{"zeta":{"command":"$CMD","env":{"K":"$SECRET"}},"alpha":{"type":"http","url":"$URL"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"zeta":{"command":"$CMD","env":{"K":"***"}},"alpha":{"type":"http","url":"$URL"}}`; string(got) != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	for _, empty := range []string{"", `{}`, `{"mcpServers":null}`} {
		got, err := MaskedServers([]byte(empty))
		if err != nil || string(got) != "{}" {
			t.Fatalf("MaskedServers(%q) = %s, %v", empty, got, err)
		}
	}
	if _, err := MaskedServers([]byte(`[]`)); err == nil {
		t.Fatal("a non-object file was accepted")
	}
}
