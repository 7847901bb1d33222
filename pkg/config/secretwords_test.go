package config

import "testing"

func TestNormalizeAndSensitiveKeys(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"refreshToken": "refresh_token", "api_key": "api_key", "X-Api-Key": "x_api_key",
		"APIKey": "api_key", "clientSecret": "client_secret", "cwd": "cwd", "customFlag": "custom_flag",
	} {
		if got := NormalizeKey(in); got != want {
			t.Errorf("NormalizeKey(%q) = %q, want %q", in, got, want)
		}
	}
	for _, k := range []string{"refreshToken", "api_key", "apiKey", "APIKEY", "accessKey", "privateKey", "client_secret",
		"secret", "token", "password", "passwd", "credential", "credentials", "authorization", "bearer", "X-Auth-Token", "db_password_file"} {
		if !IsSensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = false", k)
		}
	}
	for _, k := range []string{"cwd", "customFlag", "tokenizer", "secretary", "passwords_policy_url", "keyword", "bearing"} {
		if IsSensitiveKey(k) {
			t.Errorf("IsSensitiveKey(%q) = true", k)
		}
	}
}
