package mcpclient

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// ErrRedirect is matched (errors.Is) by a redirect that was not followed:
// the server answered with one and its spec does not follow redirects
// ([Spec.FollowRedirects]).
var ErrRedirect = errors.New("the MCP server answered with a redirect")

// maxRedirects bounds the redirects one request follows when a server opts
// in (net/http's own bound).
const maxRedirects = 10

// checkRedirect is the CheckRedirect of a server's HTTP client. Without
// Spec.FollowRedirects every redirect fails the request before anything is
// sent to its target. With it, each hop is checked by check (the egress
// policy; nil: none) and, when it leaves the first request's origin
// (scheme, host and port), loses the headers mcpbus set: the configured
// ones and the call's own (headers_from_context, OAuth, user_auth);
// net/http would copy them to any host. The session id stays: the target
// issued it, since the initialize was redirected too.
func checkRedirect(spec Spec, check func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if !spec.FollowRedirects {
			return fmt.Errorf("%w to %s, which is not followed (follow_redirects is off for MCP server %q)", ErrRedirect, originOf(req.URL), spec.Server)
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("%w: stopped after %d redirects", ErrRedirect, maxRedirects)
		}
		if check != nil {
			if err := check(req, via); err != nil {
				return err
			}
		}
		if originOf(req.URL) != originOf(via[0].URL) {
			for name := range spec.Headers {
				req.Header.Del(name)
			}
			for name := range requestHeaders(req.Context()) {
				req.Header.Del(name)
			}
			for _, name := range []string{"Authorization", "Cookie", "Proxy-Authorization"} {
				req.Header.Del(name)
			}
		}
		return nil
	}
}

// originOf is u's scheme, host and port ("https://example.com:443"), the
// default port spelled out, so that two spellings of one origin compare
// equal. Nothing else of u: a redirect's path and query may carry secrets.
func originOf(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return u.Scheme + "://" + u.Hostname() + ":" + port
}
