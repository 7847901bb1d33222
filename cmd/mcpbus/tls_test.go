package main_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/mcpbus/mcpbus/pkg/bus"
)

// testCerts runs deploy/secrets/certs.sh into a fresh directory and
// returns the directory of the certificates (ca.pem, nats.pem, api.pem,
// mcpbus-<service>.pem, ...).
func testCerts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("bash", filepath.Join("..", "..", "deploy", "secrets", "certs.sh"), dir).CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/secrets/certs.sh: %v\n%s", err, out)
	}
	return filepath.Join(dir, "tls")
}

// TestTLSEverywhere runs the five services, each as its own NATS user, on
// a nats-server that accepts TLS only and asks every client for a
// certificate of the deployment CA (mutual TLS), with the api serving
// HTTPS itself, all from deploy/secrets/certs.sh's certificates: the
// services verify the server (nats.tls.ca_file), present their client
// certificate (nats.tls.cert_file/key_file), and a tool call over HTTPS
// works for a client that trusts the CA. Refused: a plaintext NATS client,
// a TLS client without a certificate, a client that does not trust the
// CA (NATS and HTTPS) and plain HTTP on the api's port.
func TestTLSEverywhere(t *testing.T) {
	certs := testCerts(t)
	pem := func(name string) string { return filepath.Join(certs, name) }
	p := startPermNATS(t, []string{fmt.Sprintf("tls {cert_file: %q, key_file: %q, ca_file: %q, verify: true}",
		pem("nats.pem"), pem("nats.key"), pem("ca.pem"))})
	clientTLS := bus.TLS{CAFile: pem("ca.pem"), CertFile: pem("mcpbus-toolcall.pem"), KeyFile: pem("mcpbus-toolcall.key")}
	st := startStackWith(t, stackOptions{natsURL: p.url(""), names: bus.Names{}, env: p.servicesEnv(),
		ext:         fmt.Sprintf(`{"mcpServers": {"demo": {"type": "stdio", "command": %q}}}`, demoBin),
		settings:    fmt.Sprintf("  tls:\n    ca_file: %s\n    cert_file: %s\n    key_file: %s\n", clientTLS.CAFile, clientTLS.CertFile, clientTLS.KeyFile),
		apiTLS:      fmt.Sprintf("  tls:\n    cert_file: %s\n    key_file: %s\n", pem("api.pem"), pem("api.key")),
		observerURL: p.url("test-observer"), observerTLS: clientTLS})

	// Every service is connected over TLS as its own user.
	connz, err := p.srv.Connz(&server.ConnzOptions{Username: true})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range connz.Conns {
		if strings.HasPrefix(c.Name, "mcpbus-") && c.Name != "mcpbus-dev-health" {
			seen[c.Name] = true
			if c.TLSVersion == "" || c.AuthorizedUser != c.Name {
				t.Errorf("connection %s: TLS %q, user %q; want TLS as its own user", c.Name, c.TLSVersion, c.AuthorizedUser)
			}
		}
	}
	for _, svc := range []string{bus.ServiceTokens, bus.ServiceDiscovery, bus.ServiceToolcall, bus.ServiceTaskpoller, bus.ServiceAPI} {
		if !seen[svc] {
			t.Errorf("no connection of %s on the TLS server", svc)
		}
	}

	// HTTPS with the deployment CA.
	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(pem("ca.pem"))
	if err != nil || !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.pem: %v", err)
	}
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := trusting.Post(st.api+"/api/mcp/tools/demo_echo/call", "application/json", strings.NewReader(`{"arguments":{"message":"over tls"}}`))
	if err != nil {
		t.Fatalf("a call over HTTPS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "over tls") {
		t.Fatalf("a call over HTTPS: %d %s", resp.StatusCode, body)
	}

	// Refused.
	if _, err := (&http.Client{}).Get(st.api + "/healthz"); err == nil || !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Errorf("an HTTPS client without the deployment CA: %v, want an unknown authority error", err)
	}
	if resp, err := http.Get(strings.Replace(st.api, "https://", "http://", 1) + "/healthz"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP on the api's HTTPS port was served")
		}
	}
	apiUser := nats.UserInfo(bus.ServiceAPI, p.pw["API"])
	for what, opts := range map[string][]nats.Option{
		"a plaintext client":                  {apiUser},
		"a TLS client without a certificate":  {apiUser, nats.RootCAs(pem("ca.pem"))},
		"a client that does not trust the CA": {apiUser, nats.Secure(), nats.ClientCert(clientTLS.CertFile, clientTLS.KeyFile)},
	} {
		if nc, err := nats.Connect(p.url(""), append(opts, nats.MaxReconnects(0))...); err == nil {
			nc.Close()
			t.Errorf("%s connected to the mutual-TLS NATS server", what)
		}
	}
}
