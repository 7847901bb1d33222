package api

import (
	"cmp"
	"fmt"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/egress"
)

// checkEgress refuses, on save, a personal http/sse url or OAuth token_url
// that the egress policy refuses (the scheme, and a literal address or
// "localhost"; names are checked again when connecting, after resolution,
// by discovery, toolcall and tokens). The error names the field.
func (s *Service) checkEgress(name string, srv *config.Server) error {
	policy, err := egress.New(s.cfg.EgressAllow, nil)
	if err != nil {
		return bus.Wrap(bus.CodeConfigError, err, "the egress policy (egress_allow) of the api service is not valid")
	}
	check := func(field, u string) error {
		if err := policy.CheckURL(u); err != nil {
			return &bus.Error{Code: bus.CodeInvalidRequest, Details: details(name, field, ""),
				Message: fmt.Sprintf("personal MCP server '%s' field '%s': %s", name, field, cmp.Or(bus.UserMessage(err), "refused by the egress policy"))}
		}
		return nil
	}
	if srv.Type != config.TransportStdio {
		if err := check("url", srv.URL); err != nil {
			return err
		}
	}
	if srv.OAuthEnabled() {
		return check("oauth.token_url", srv.OAuth.TokenURL)
	}
	return nil
}
