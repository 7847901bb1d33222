package config

import (
	"strings"

	"github.com/mcpbus/mcpbus/pkg/redact"
)

// SecretValues lists the values of s (after $VAR expansion, as the upstream
// or the child sees them) that must never be shown in errors, logs or
// replies: env and headers values, user_auth credentials, oauth
// client_secret, refresh_token and extra_token_params values, and the
// userinfo and query values of url and oauth.token_url, and the secret
// parts of args (those MaskArgs masks).
func (s *Server) SecretValues() []string {
	var out []string
	for _, v := range s.Env {
		out = append(out, v)
	}
	for _, v := range s.Headers {
		out = append(out, v)
	}
	out = append(out, redact.URLSecrets(s.URL)...)
	masked, secret := MaskArgs(s.Args)
	for i, a := range s.Args {
		switch {
		case !secret[i]:
		case strings.Contains(a, "://"):
			out = append(out, redact.URLSecrets(a)...)
		default:
			// NAME=VALUE keeps its NAME= prefix; a flag's value is masked whole.
			prefix := strings.TrimSuffix(masked[i], MaskedValue)
			out = append(out, strings.TrimPrefix(a, prefix))
		}
	}
	if s.UserAuth != nil {
		for _, v := range s.UserAuth.Users {
			out = append(out, v)
		}
	}
	if o := s.OAuth; o != nil {
		out = append(out, o.ClientSecret, o.RefreshToken)
		for _, v := range o.ExtraTokenParams {
			out = append(out, v)
		}
		out = append(out, redact.URLSecrets(o.TokenURL)...)
	}
	return out
}

// Redactor is a redact.Redactor for s's SecretValues.
func (s *Server) Redactor() *redact.Redactor { return redact.New(s.SecretValues()...) }
