package deploy_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// writeTestCA writes a CA and a server certificate it signs, for hosts,
// into dir as cert-manager lays out a Secret (ca.crt, tls.crt, tls.key).
func writeTestCA(t *testing.T, dir string, hosts ...string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mcpbus test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]}, DNSNames: hosts,
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{
		"ca.crt":  {Type: "CERTIFICATE", Bytes: caDER},
		"tls.crt": {Type: "CERTIFICATE", Bytes: srvDER},
		"tls.key": {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHelmNATSWithTLS runs the NATS configuration the chart makes with TLS
// on (the production values), its certificate files where cert-manager's
// Secret would be mounted: nats-server loads it with TLS on the client
// port, the routes (peers verified) and monitoring (HTTPS), lame-duck
// mode configured; started (one node, routes off), it serves a client
// that trusts the CA, and refuses a plaintext client and one that does
// not trust the CA.
func TestHelmNATSWithTLS(t *testing.T) {
	pw := testPasswords(t)
	m := mustRender(t, productionArgs...)
	cm := m.configMaps["mcpbus-nats-config"]
	if cm == nil {
		t.Fatal("no ConfigMap mcpbus-nats-config")
	}
	dir, certs := t.TempDir(), t.TempDir()
	writeTestCA(t, certs, "localhost", "mcpbus-nats", "*.mcpbus-nats-headless")
	for name, content := range cm.Data {
		content = strings.ReplaceAll(content, "/etc/nats-tls/", certs+"/")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := natsOptions(t, dir, "mcpbus-nats-0", pw, "")
	if opts.TLSConfig == nil || opts.Cluster.TLSConfig == nil || opts.HTTPSPort != 8222 || opts.HTTPPort != 0 {
		t.Fatalf("TLS: clients %v, routes %v, monitoring https %d / http %d", opts.TLSConfig != nil, opts.Cluster.TLSConfig != nil, opts.HTTPSPort, opts.HTTPPort)
	}
	if !strings.Contains(cm.Data["cluster.conf"], "verify: true") {
		t.Error("routes do not verify their peers' certificates")
	}
	if opts.LameDuckDuration != 30*time.Second {
		t.Errorf("lame_duck_duration %v, want the values' 30s", opts.LameDuckDuration)
	}

	opts.Host, opts.Port, opts.HTTPSPort, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, 0, true, true
	opts.Cluster.Port, opts.Cluster.Name, opts.Routes = 0, "", nil
	opts.StoreDir, opts.PidFile = filepath.Join(dir, "js"), filepath.Join(dir, "nats.pid")
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	port := srv.Addr().(*net.TCPAddr).Port
	// Any user of accounts.conf: the first password variable's.
	vars := accountsVars(t)
	user := strings.ReplaceAll(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(vars[0], "MCPBUS_NATS_"), "_PASSWORD")), "_", "-")
	if !strings.HasPrefix(user, "agent-") {
		user = "mcpbus-" + user
	}
	connect := func(url string, o ...nats.Option) error {
		nc, err := nats.Connect(url, append(o, nats.UserInfo(user, pw[vars[0]]), nats.MaxReconnects(0), nats.Timeout(5*time.Second))...)
		if err == nil {
			nc.Close()
		}
		return err
	}
	trusted := nats.RootCAs(filepath.Join(certs, "ca.crt"))
	if err := connect(fmt.Sprintf("tls://localhost:%d", port), trusted); err != nil {
		t.Fatalf("a client trusting the CA, as %s: %v", user, err)
	}
	if err := connect(fmt.Sprintf("nats://127.0.0.1:%d", port)); err == nil {
		t.Error("a plaintext client connected to the TLS port")
	}
	if err := connect(fmt.Sprintf("tls://localhost:%d", port)); err == nil {
		t.Error("a client that does not trust the CA connected")
	}
}
