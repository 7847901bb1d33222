package egress_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpbus/mcpbus/pkg/egress"
)

func TestCheckURL(t *testing.T) {
	p := egress.MustNew([]string{"10.1.2.0/24", "mcp.internal.example", "169.254.169.254"}, nil)
	strict := egress.MustNew(nil, nil)
	for _, tc := range []struct {
		url    string
		policy *egress.Policy
		ok     bool
	}{
		{"https://example.com/mcp", strict, true},
		{"http://93.184.215.14/mcp", strict, true},
		{"file:///etc/passwd", strict, false},
		{"gopher://example.com/", strict, false},
		{"http:///nohost", strict, false},
		{"http://127.0.0.1:8080/", strict, false},
		{"http://localhost/", strict, false},
		{"http://a.localhost/", strict, false},
		{"http://[::1]/", strict, false},
		{"http://[::ffff:127.0.0.1]/", strict, false},
		{"http://[64:ff9b::7f00:1]/", strict, false},
		{"http://0.0.0.0/", strict, false},
		{"http://10.0.0.1/", strict, false},
		{"http://172.20.0.1/", strict, false},
		{"http://192.168.1.1/", strict, false},
		{"http://100.64.0.1/", strict, false},
		{"http://169.254.169.254/latest/meta-data/", strict, false},
		{"http://[fd00:ec2::254]/", strict, false},
		{"http://[fe80::1]/", strict, false},
		{"http://224.0.0.1/", strict, false},
		{"http://10.1.2.3/", p, true},
		{"http://10.1.3.3/", p, false},
		{"http://MCP.internal.example./", p, true},
		{"http://169.254.169.254/", p, true},
	} {
		err := tc.policy.CheckURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q) = %v, want ok=%v", tc.url, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, egress.ErrRefused) || !strings.Contains(err.Error(), "refused by the egress policy")) {
			t.Errorf("CheckURL(%q) error %q does not say refused by the egress policy", tc.url, err)
		}
	}
}

func TestNewRejectsBadEntries(t *testing.T) {
	for _, a := range []string{"", "10.0.0.0/33", "http://x/", "a b"} {
		if _, err := egress.New([]string{a}, nil); err == nil || !strings.Contains(err.Error(), "egress.allow[0]") {
			t.Errorf("New(%q) = %v, want an error naming egress.allow[0]", a, err)
		}
	}
}

// A wide CIDR does not admit a metadata address.
func TestMetadataNeedsExactEntry(t *testing.T) {
	p := egress.MustNew([]string{"169.254.0.0/16"}, nil)
	if err := p.CheckURL("http://169.254.169.254/"); !errors.Is(err, egress.ErrRefused) {
		t.Fatalf("metadata address through a /16: %v, want refused", err)
	}
	if err := p.CheckURL("http://169.254.1.1/"); err != nil {
		t.Fatalf("169.254.1.1 allowed by the /16: %v", err)
	}
}

// The dialer refuses a metadata address before any connect: the Control
// hook runs before connect(2), so nothing is ever sent to it. The refusal
// reads as an unreachable host.
func TestDialRefusesMetadataBeforeConnect(t *testing.T) {
	p := egress.MustNew(nil, nil)
	_, err := p.DialContext(context.Background(), "tcp", "169.254.169.254:80")
	if !errors.Is(err, egress.ErrUnreachable) {
		t.Fatalf("dial 169.254.169.254:80 = %v, want %q", err, egress.ErrUnreachable)
	}
	if strings.Contains(err.Error(), "169.254") {
		t.Fatalf("error %q names the address", err)
	}
}

// A name that resolves to loopback is refused when connecting, whatever
// CheckURL said about the name.
func TestDialRefusesNameResolvingToLoopback(t *testing.T) {
	ln, accepted := listen(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	p := egress.MustNew(nil, nil)
	if err := p.CheckURL("http://localtest.invalid/"); err != nil {
		t.Fatalf("CheckURL of a plain name: %v", err)
	}
	// "localhost" resolves to 127.0.0.1 without DNS.
	_, err := p.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port))
	if !errors.Is(err, egress.ErrUnreachable) {
		t.Fatalf("dial localhost = %v, want %q", err, egress.ErrUnreachable)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the loopback listener accepted %d connection(s)", n)
	}
}

// The DNS oracle: a name that resolves to an internal address and a name
// that does not resolve at all answer the same text, so a user cannot map
// internal names by trying them. The reason is in the debug log only.
func TestDialRefusalIsNotADNSOracle(t *testing.T) {
	ln, accepted := listen(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var logs bytes.Buffer
	p := egress.MustNew(nil, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	_, internal := p.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port))
	_, unknown := p.DialContext(context.Background(), "tcp", net.JoinHostPort("no-such-host.invalid", port))
	if internal == nil || unknown == nil || internal.Error() != unknown.Error() {
		t.Fatalf("internal name: %v; unknown name: %v; want the same error", internal, unknown)
	}
	if strings.Contains(internal.Error(), "loopback") || errors.Is(internal, egress.ErrRefused) {
		t.Fatalf("the refusal %q tells the range", internal)
	}
	if !strings.Contains(logs.String(), "loopback") {
		t.Fatalf("the debug log does not give the reason: %s", logs.String())
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the loopback listener accepted %d connection(s)", n)
	}
}

// An allowlisted host name does not switch the address check off: the name
// resolving to loopback is refused unless an IP entry allows the address.
func TestAllowedNameStillRefusesLoopback(t *testing.T) {
	ln, accepted := listen(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	named := egress.MustNew([]string{"localhost"}, nil)
	if err := named.CheckURL("http://localhost:" + port + "/"); err != nil {
		t.Fatalf("CheckURL of the allowlisted name: %v", err)
	}
	if _, err := named.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port)); !errors.Is(err, egress.ErrUnreachable) {
		t.Fatalf("dial of the allowlisted name resolving to loopback = %v, want %q", err, egress.ErrUnreachable)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the loopback listener accepted %d connection(s)", n)
	}
	withIP := egress.MustNew([]string{"localhost", "127.0.0.1"}, nil)
	conn, err := withIP.DialContext(context.Background(), "tcp", net.JoinHostPort("localhost", port))
	if err != nil {
		t.Fatalf("dial with an IP entry for loopback: %v", err)
	}
	_ = conn.Close()
}

// What an allowlisted name may resolve to: private addresses, but never a
// metadata, loopback or unspecified address without an IP or CIDR entry
// for it (a metadata address needs its exact entry).
func TestAllowedNameAddressCheck(t *testing.T) {
	p := egress.MustNew([]string{"mcp.internal.example"}, nil)
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"10.1.2.3:443", true},
		{"192.168.1.1:443", true},
		{"169.254.169.254:80", false},
		{"[fd00:ec2::254]:80", false},
		{"127.0.0.1:80", false},
		{"[::1]:80", false},
		{"0.0.0.0:80", false},
	} {
		if err := p.CheckDialed(c.addr, true); (err == nil) != c.ok {
			t.Errorf("name resolving to %s: %v, want ok=%v", c.addr, err, c.ok)
		}
	}
	if err := p.CheckDialed("10.1.2.3:443", false); err == nil {
		t.Errorf("a name not on the allowlist resolving to 10.1.2.3 was allowed")
	}
	exact := egress.MustNew([]string{"mcp.internal.example", "169.254.169.254", "127.0.0.0/8"}, nil)
	for _, addr := range []string{"169.254.169.254:80", "127.0.0.1:80"} {
		if err := exact.CheckDialed(addr, true); err != nil {
			t.Errorf("%s with its own entry: %v", addr, err)
		}
	}
}

// A closed port and a refused address look the same to the user apart from
// the policy's own refusals: no "connection refused".
func TestDialErrorsAreGeneric(t *testing.T) {
	ln, _ := listen(t, "127.0.0.1:0")
	addr := ln.Addr().String()
	_ = ln.Close()
	p := egress.MustNew([]string{"127.0.0.1"}, nil)
	_, err := p.DialContext(context.Background(), "tcp", addr)
	if !errors.Is(err, egress.ErrUnreachable) || strings.Contains(err.Error(), "refused") {
		t.Fatalf("dial to a closed port = %v, want the generic %q", err, egress.ErrUnreachable)
	}
}

// A redirect from an allowed host to loopback is refused, and the loopback
// server never sees a request.
func TestRedirectToLoopbackRefused(t *testing.T) {
	var hits atomic.Int32
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "internal secret")
	}))
	defer inner.Close()
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	outer := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.RedirectHandler(inner.URL+"/x", http.StatusFound)}}
	outer.Start()
	defer outer.Close()

	p := egress.MustNew([]string{"127.0.0.2/32"}, nil)
	resp, err := p.HTTPClient().Get(outer.URL)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("redirect to loopback followed: %d %q", resp.StatusCode, b)
	}
	if !errors.Is(err, egress.ErrRefused) || strings.Contains(err.Error(), "internal secret") {
		t.Fatalf("error %v, want refused by the egress policy", err)
	}
	if hits.Load() != 0 {
		t.Fatalf("the loopback server got %d request(s)", hits.Load())
	}
}

func listen(t *testing.T, addr string) (net.Listener, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	return ln, &n
}
