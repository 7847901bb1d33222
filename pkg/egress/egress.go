// Package egress is the policy for outbound connections to upstreams a user
// controls (personal http/sse connections and their OAuth token_url): only
// http and https, and never an address inside the host or its network
// (loopback, private, link-local, CGNAT, multicast, unspecified, reserved
// and cloud metadata addresses, IPv4-mapped and NAT64 forms included) unless
// the operator allowed it. The address is checked when the socket connects,
// after DNS resolution (a net.Dialer Control hook), so a name that resolves
// to an internal address, or is re-bound to one later, does not help; every
// redirect is checked again. A host name on the allowlist may resolve to
// private addresses, but still not to a metadata, loopback or unspecified
// one unless an IP or CIDR entry allows that address.
//
// A refusal found when connecting (after resolution) answers the same
// generic text as an unreachable host, so the error does not tell which
// range a name resolves to; the reason goes to the debug log. Refusals of
// what the user wrote (a scheme, a literal address) name the rule.
// Deployment servers, which the operator writes, do not go through the
// dialer; their redirects, when a server opts in to them, are checked by
// CheckRedirect.
package egress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is matched (errors.Is) by every refusal of the policy. Its
// text is what users see.
var ErrRefused = errors.New("refused by the egress policy")

// ErrUnreachable replaces every failure to connect to an allowed address
// (refused, timed out, unreachable, unknown host), so users cannot tell a
// closed port from a filtered one. The cause is logged at debug.
var ErrUnreachable = errors.New("the server could not be reached")

// RefusedError is a refusal with the reason, for logs. Its Error text
// carries the reason only for what the user wrote themselves (a scheme, a
// literal host), never a resolved address.
type RefusedError struct {
	// Reason says why, e.g. "scheme \"file\" is not http or https".
	Reason string
}

func (e *RefusedError) Error() string {
	if e.Reason == "" {
		return ErrRefused.Error()
	}
	return ErrRefused.Error() + ": " + e.Reason
}

// UserMessage is Error: the refusal names the rule, never more of the URL
// than its scheme (bus.UserMessager).
func (e *RefusedError) UserMessage() string { return e.Error() }

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// maxRedirects bounds the redirects one request follows.
const maxRedirects = 10

// dialTimeout bounds one TCP connect.
const dialTimeout = 30 * time.Second

// Policy decides which addresses a user-controlled upstream may reach. The
// zero value is not usable; build one with New. A Policy is safe for
// concurrent use.
type Policy struct {
	nets  []netip.Prefix
	hosts map[string]bool
	log   *slog.Logger
}

// New builds a policy from the operator's allowlist (config.yaml
// egress.allow): each entry is a CIDR ("10.1.2.0/24"), an IP address or a
// host name (exact, case-insensitive: "mcp.internal.example"). A cloud
// metadata address is reached only when an entry names it exactly, never
// through a wider CIDR. A host-name entry admits the name and the private
// addresses it resolves to, never a metadata, loopback or unspecified
// address (those need an IP or CIDR entry). log receives dial failures at debug (nil discards).
func New(allow []string, log *slog.Logger) (*Policy, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Policy{hosts: map[string]bool{}, log: log}
	for i, a := range allow {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
			return nil, fmt.Errorf("egress.allow[%d]: empty entry", i)
		case strings.Contains(a, "/"):
			pfx, err := netip.ParsePrefix(a)
			if err != nil {
				return nil, fmt.Errorf("egress.allow[%d]: %q is not a CIDR", i, a)
			}
			p.nets = append(p.nets, unmapPrefix(pfx.Masked()))
		default:
			if ip, err := netip.ParseAddr(a); err == nil {
				ip = ip.Unmap()
				p.nets = append(p.nets, netip.PrefixFrom(ip, ip.BitLen()))
				continue
			}
			h := strings.ToLower(strings.TrimSuffix(a, "."))
			if strings.ContainsAny(h, " :/@?#") {
				return nil, fmt.Errorf("egress.allow[%d]: %q is neither a CIDR, an IP address nor a host name", i, a)
			}
			p.hosts[h] = true
		}
	}
	return p, nil
}

// MustNew is New for allowlists known to be valid (tests, defaults).
func MustNew(allow []string, log *slog.Logger) *Policy {
	p, err := New(allow, log)
	if err != nil {
		panic(err)
	}
	return p
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// HTTPClient returns a new client of the policy: no proxy (a proxy would
// connect on the client's behalf, past the check), every connect checked,
// every redirect checked, no overall timeout (the callers' contexts bound
// each request). Each client has its own connection pool, so that the
// session that owns it can close every connection it opened
// (CloseIdleConnections) when it ends, one a cancelled dial left idle
// included: a user's upstream keeps nothing open after its session.
func (p *Policy) HTTPClient() *http.Client {
	return &http.Client{Transport: p.newTransport(), CheckRedirect: p.CheckRedirect}
}

func (p *Policy) newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.DialContext
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	return t
}

// WrapTransport returns a copy of base (an *http.Transport, or nil for
// net/http's default) that connects through the policy and uses no proxy.
func (p *Policy) WrapTransport(base *http.Transport) *http.Transport {
	if base == nil {
		return p.newTransport()
	}
	t := base.Clone()
	t.Proxy = nil
	t.DialContext = p.DialContext
	t.DialTLSContext = nil
	return t
}

// DialContext connects to address (host:port) when the policy allows it:
// every address the host resolves to is checked before connecting
// (checkDialed). Every failure, a refusal found here included, is
// ErrUnreachable: the user cannot learn from it where a name resolves. The
// reason is logged at debug.
func (p *Policy) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &RefusedError{Reason: "the address has no port"}
	}
	named := p.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second, Control: func(_, addr string, _ syscall.RawConn) error {
		return p.checkDialed(addr, named)
	}}
	conn, err := d.DialContext(ctx, network, address)
	if err == nil {
		return conn, nil
	}
	var refused *RefusedError
	if errors.As(err, &refused) {
		// Not the reason, nor the *net.OpError (it names the resolved
		// address): the same text as an unknown host.
		p.log.Debug("egress refused a connection", "host", host, "reason", refused.Reason)
		return nil, ErrUnreachable
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	p.log.Debug("egress connection failed", "host", host, "error", err)
	return nil, ErrUnreachable
}

// Control is a net.Dialer Control hook: it refuses to connect to address
// (the resolved ip:port) unless the policy allows it.
func (p *Policy) Control(_, address string, _ syscall.RawConn) error {
	return p.checkDialed(address, false)
}

// checkDialed refuses address (the resolved ip:port about to be connected
// to) unless the policy allows it. named says the host was dialled by an
// allowlisted name: then only a metadata, loopback or unspecified address
// is refused (unless an IP or CIDR entry allows it).
func (p *Policy) checkDialed(address string, named bool) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return &RefusedError{}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return &RefusedError{}
	}
	if reason := p.checkIP(ip, named); reason != "" {
		// The reason names a range, never the address (it may be an
		// internal one the user only knows by name).
		return &RefusedError{Reason: "the server's address is " + reason}
	}
	return nil
}

// CheckRedirect is an http.Client CheckRedirect: each hop must pass
// CheckURL (the dialer checks the address it resolves to), and at most 10
// are followed.
func (p *Policy) CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	if err := p.checkURL(req.URL); err != nil {
		return fmt.Errorf("redirect: %w", err)
	}
	return nil
}

// CheckURL checks a URL as saved, without resolving it: the scheme is http
// or https, there is a host, and a literal IP address (or "localhost") is
// one the policy allows. A host name that resolves to an internal address
// passes here and is refused when connecting: resolving at save would prove
// nothing, since DNS can change afterwards.
func (p *Policy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return &RefusedError{Reason: "the URL does not parse"}
	}
	return p.checkURL(u)
}

func (p *Policy) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return &RefusedError{Reason: fmt.Sprintf("scheme %q is not http or https", u.Scheme)}
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "" {
		return &RefusedError{Reason: "the URL has no host"}
	}
	if p.hosts[host] {
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return &RefusedError{Reason: "the host is loopback"}
	}
	if ip, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if reason := p.checkIP(ip, false); reason != "" {
			return &RefusedError{Reason: "the host is " + reason}
		}
	}
	return nil
}

// checkIP returns why ip is refused ("" when allowed). named relaxes the
// check to the ranges no host-name entry admits (blockedRange.always).
func (p *Policy) checkIP(ip netip.Addr, named bool) string {
	ip = ip.WithZone("").Unmap()
	if ip.Is6() && nat64.Contains(ip) {
		// 64:ff9b::a.b.c.d reaches a.b.c.d through a NAT64 gateway.
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:16]))
	}
	for _, m := range metadata {
		if ip == m {
			// Only an exact entry admits a metadata address.
			for _, n := range p.nets {
				if n.IsSingleIP() && n.Addr() == ip {
					return ""
				}
			}
			return "a cloud metadata address"
		}
	}
	for _, n := range p.nets {
		if n.Contains(ip) {
			return ""
		}
	}
	for _, b := range blocked {
		if b.prefix.Contains(ip) && (b.always || !named) {
			return b.reason
		}
	}
	return ""
}

// metadata are cloud instance metadata addresses (AWS, GCP, Azure,
// OpenStack: 169.254.169.254; AWS IPv6: fd00:ec2::254; Oracle:
// 169.254.169.253 DNS; Alibaba: 100.100.100.200).
var metadata = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("169.254.169.253"),
	netip.MustParseAddr("169.254.170.2"), // ECS task metadata
	netip.MustParseAddr("fd00:ec2::254"),
	netip.MustParseAddr("fd00:ec2::23"),
	netip.MustParseAddr("100.100.100.200"),
}

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

type blockedRange struct {
	prefix netip.Prefix
	reason string
	// always: refused even for a host-name entry of the allowlist (only
	// an IP or CIDR entry admits it).
	always bool
}

// blocked are the ranges refused unless allowed.
var blocked = func() []blockedRange {
	var out []blockedRange
	add := func(reason string, cidrs ...string) {
		for _, c := range cidrs {
			out = append(out, blockedRange{prefix: netip.MustParsePrefix(c), reason: reason})
		}
	}
	add("loopback", "127.0.0.0/8", "::1/128")
	add("unspecified", "0.0.0.0/8", "::/128")
	for i := range out {
		out[i].always = true
	}
	add("private", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
	add("link-local", "169.254.0.0/16", "fe80::/10")
	add("shared address space (CGNAT)", "100.64.0.0/10")
	add("multicast", "224.0.0.0/4", "ff00::/8")
	add("reserved", "192.0.0.0/24", "198.18.0.0/15", "240.0.0.0/4", "100::/64", "2001:db8::/32", "fec0::/10")
	return out
}()
