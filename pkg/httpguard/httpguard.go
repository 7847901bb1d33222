// Package httpguard refuses HTTP requests that a web page open in a
// browser could forge against an mcpbus HTTP endpoint (the REST API, and
// the aggregated /mcp endpoint): cross-site POSTs (CSRF) and requests that
// reach a loopback listener through a rebinding DNS name.
//
// # Rules
//
//   - Every POST, PUT and PATCH must carry Content-Type: application/json
//     (parameters such as charset are allowed), with or without a body;
//     anything else is refused with 415. A page can send a text/plain,
//     form or multipart POST cross-site without a CORS preflight, but not
//     an application/json one, and mcpbus answers no preflight.
//   - In loopback mode (no API keys: every caller is the admin), the Host
//     header must name a loopback address (localhost, 127.0.0.0/8 or ::1,
//     with any port), and an Origin header, when sent, must be the
//     request's own origin (http://<Host>) or one of AllowedOrigins;
//     anything else, "null" included, is refused with 403, on every route
//     and every method.
//   - With API keys, Host and Origin are not checked: a browser cannot add
//     Authorization: Bearer to a cross-site request without a preflight,
//     and mcpbus uses no cookies, so a page has nothing to replay.
//
// Refusals name the header and the rule, never its value.
package httpguard

import (
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// Guard holds the rules of one HTTP endpoint. The zero value checks only
// the Content-Type rule. Safe for concurrent use.
type Guard struct {
	// Loopback turns on the Host and Origin checks (set it when no API keys
	// are configured).
	Loopback bool
	// AllowedOrigins are extra origins ("scheme://host[:port]") accepted in
	// loopback mode, such as a local UI on another port. Compared
	// case-insensitively.
	AllowedOrigins []string
}

// Refusal is a refused request: the HTTP status and the error to reply.
type Refusal struct {
	Status int
	Err    *bus.Error
}

func (r *Refusal) Error() string { return r.Err.Error() }

// Check returns why r must be refused, or nil.
func (g Guard) Check(r *http.Request) *Refusal {
	if g.Loopback {
		if !LoopbackHost(r.Host) {
			return forbidden("the Host header does not name a loopback address: with no API keys configured, the API answers only requests addressed to localhost, 127.0.0.1 or [::1] (protection against DNS rebinding); configure api.keys to serve other host names")
		}
		if origin, sent := r.Header["Origin"]; sent && !g.sameOrAllowed(origin, r) {
			return forbidden("cross-site request refused: with no API keys configured, the API accepts an Origin header only when it is the API's own loopback origin or listed in api.allowed_origins")
		}
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return &Refusal{Status: http.StatusUnsupportedMediaType, Err: bus.Errorf(bus.CodeInvalidRequest,
				"%s requests must send Content-Type: application/json (an empty body included)", r.Method)}
		}
	}
	return nil
}

// Handler wraps next for a net/http server: refused requests get the
// status and the JSON body {"error": {code, message}}.
func (g Guard) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ref := g.Check(r); ref != nil {
			body, _ := json.Marshal(bus.ErrorReply{Error: ref.Err})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(ref.Status)
			_, _ = w.Write(body)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func forbidden(msg string) *Refusal {
	return &Refusal{Status: http.StatusForbidden, Err: bus.Errorf(bus.CodeForbidden, "%s", msg)}
}

// LoopbackHost reports whether a Host header value or a listen address
// (host or host:port) names localhost or a loopback IP (127.0.0.0/8, ::1).
func LoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.Contains(hostport, ":") && !strings.HasPrefix(hostport, "[") {
		return false // a bare IPv6 address without brackets is not a valid Host
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrAllowed reports whether the Origin header values are all the
// request's own loopback origin or an allowed one.
func (g Guard) sameOrAllowed(values []string, r *http.Request) bool {
	if len(values) != 1 {
		return false
	}
	origin := strings.ToLower(strings.TrimSpace(values[0]))
	for _, a := range g.AllowedOrigins {
		if origin == strings.ToLower(strings.TrimRight(a, "/")) {
			return true
		}
	}
	u, err := url.Parse(origin)
	if err != nil || u.Path != "" || u.RawQuery != "" || u.User != nil || u.Host == "" {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && LoopbackHost(u.Host) && sameHostPort(u.Host, r.Host, scheme)
}

// sameHostPort compares two host[:port] values, the scheme's default port
// filled in.
func sameHostPort(a, b, scheme string) bool {
	return strings.EqualFold(withPort(a, scheme), withPort(b, scheme))
}

func withPort(hostport, scheme string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.Trim(hostport, "[]"), "443")
	}
	return net.JoinHostPort(strings.Trim(hostport, "[]"), "80")
}
