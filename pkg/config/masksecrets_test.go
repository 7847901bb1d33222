package config

import (
	"reflect"
	"testing"
)

func TestMaskURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://mcp.example/gh":                       "https://mcp.example/gh",
		"https://mcp.example/gh?api_key=sek-q-1":       "https://mcp.example/gh?***",
		"https://user:sek-pw-2@mcp.example:8443/a/b":   "https://***@mcp.example:8443/a/b",
		"https://u:p@mcp.example/s?t=1#frag":           "https://***@mcp.example/s?***#***",
		"$REMOTE_URL":                                  "$REMOTE_URL",
		"http://[::1":                                  "***",
		"mailto:someone@example.com?subject=sek-opq-3": "***",
		"": "",
	} {
		if got := MaskURL(in); got != want {
			t.Errorf("MaskURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMaskArgs(t *testing.T) {
	t.Parallel()
	args := []string{"-y", "mcp-remote", "https://mcp.example/sse?token=sek-a1", "--header", "Authorization: Bearer sek-a2",
		"--api-key=sek-a3", "--token", "sek-a4", "--verbose", "GITHUB_TOKEN=sek-a5", "--password", "--next", "$ARG", "plain"}
	masked, secret := MaskArgs(args)
	want := []string{"-y", "mcp-remote", "https://mcp.example/sse?***", "--header", "Authorization: ***",
		"--api-key=***", "--token", "***", "--verbose", "GITHUB_TOKEN=***", "--password", "--next", "$ARG", "plain"}
	if !reflect.DeepEqual(masked, want) {
		t.Fatalf("masked\n got %q\nwant %q", masked, want)
	}
	wantSecret := []bool{false, false, true, false, true, true, false, true, false, true, false, false, false, false}
	if !reflect.DeepEqual(secret, wantSecret) {
		t.Fatalf("secret = %v, want %v", secret, wantSecret)
	}
}
