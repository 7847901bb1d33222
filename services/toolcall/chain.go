package toolcall

import (
	"sync"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/interceptors"
	"github.com/mcpbus/mcpbus/pkg/observability"
)

// chainCache holds each server's interceptor chain, built once per enabled
// server (on its first call) and rebuilt when the server's config or the
// mcpInterceptors list changes.
type chainCache struct {
	mu     sync.Mutex
	chains map[string]builtChain
}

type builtChain struct {
	// ext is the config snapshot the chain was last confirmed for: the hot
	// path compares the pointer before computing any fingerprint.
	ext         *config.Extensions
	fingerprint string
	ins         []interceptors.Named
	owner       string // a personal connection's user, "" for a deployment server
}

func newChainCache() *chainCache { return &chainCache{chains: map[string]builtChain{}} }

func (c *chainCache) reset() {
	c.mu.Lock()
	c.chains = map[string]builtChain{}
	c.mu.Unlock()
}

// prune drops the chains of deployment servers gone (personal chains are
// dropped by pruneOwned).
func (c *chainCache) prune(gone func(server string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, b := range c.chains {
		if b.owner == "" && gone(name) {
			delete(c.chains, name)
		}
	}
}

// pruneOwned drops the chains of personal connections that match (owner,
// runtime name).
func (c *chainCache) pruneOwned(match func(owner, server string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, b := range c.chains {
		if b.owner != "" && match(b.owner, name) {
			delete(c.chains, name)
		}
	}
}

// nameHeadersFromContext names the headers_from_context interceptor, which
// background calls leave out.
const nameHeadersFromContext = "headers_from_context"

// chainFor returns srv's interceptors in the seed's order: OAuth, user_auth,
// the mcpInterceptors entries in config order, headers_from_context last
// (nearest the transport, so its value wins). ext is the deployment config
// (its mcpInterceptors apply to every server); owner is the user of a
// personal connection srv ("" for a deployment server), whose OAuth token
// is asked for on the owner's behalf.
func (s *Service) chainFor(srv *config.Server, ext *config.Extensions, owner string) []interceptors.Named {
	s.chains.mu.Lock()
	defer s.chains.mu.Unlock()
	c, ok := s.chains.chains[srv.Name]
	if ok && c.owner != owner {
		ok = false // never reuse a chain across owners
	}
	if ok && c.ext == ext {
		return c.ins
	}
	fp := srv.Fingerprint + "/" + ext.InterceptorsFingerprint()
	if ok && c.fingerprint == fp {
		c.ext = ext
		s.chains.chains[srv.Name] = c
		return c.ins
	}
	log := s.log.With(observability.Server(srv.Name))
	var ins []interceptors.Named
	stdio := srv.Type == config.TransportStdio
	if srv.OAuthEnabled() {
		if stdio {
			log.Warn("oauth is ignored on a stdio MCP server: it has no HTTP headers")
		} else {
			ins = append(ins, interceptors.Named{Name: "oauth", Fn: s.oauthInterceptor(srv, owner)})
		}
	}
	if ua := srv.UserAuth; ua != nil && ua.Enabled {
		if stdio {
			log.Warn("user_auth is ignored on a stdio MCP server: it has no HTTP headers")
		} else {
			ins = append(ins, interceptors.Named{Name: "user_auth", Fn: userAuthInterceptor(srv)})
		}
	}
	ins = append(ins, s.deps.Interceptors.Build(ext.Interceptors, interceptors.Env{Server: srv, Log: s.log, NC: s.deps.NC})...)
	if hfc := srv.HeadersFromContext; hfc != nil && hfc.Enabled {
		if stdio {
			log.Warn("headers_from_context is ignored on a stdio MCP server: it has no HTTP headers")
		} else {
			ins = append(ins, interceptors.Named{Name: nameHeadersFromContext, Fn: headersFromContextInterceptor(srv)})
		}
	}
	s.chains.chains[srv.Name] = builtChain{ext: ext, fingerprint: fp, ins: ins, owner: owner}
	return ins
}
