package api

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certFiles serves the api's TLS certificate from cert and key files
// (api.tls), reading them again when either file changes, so a renewed
// certificate (cert-manager, certs.sh) is served without a restart.
type certFiles struct {
	cert, key string

	mu      sync.Mutex
	current *tls.Certificate
	stamp   [2]time.Time // the files' modification times when read
}

// newCertFiles reads the pair once, so a bad file fails the start.
func newCertFiles(cert, key string) (*certFiles, error) {
	c := &certFiles{cert: cert, key: key}
	if _, err := c.get(); err != nil {
		return nil, err
	}
	return c, nil
}

// get returns the certificate, read again when a file changed; when the
// new files do not load (a renewal half written), the previous one stays.
func (c *certFiles) get() (*tls.Certificate, error) {
	var stamp [2]time.Time
	for i, f := range []string{c.cert, c.key} {
		fi, err := os.Stat(f)
		if err != nil {
			if c.current != nil {
				return c.current, nil
			}
			return nil, fmt.Errorf("api.tls: %w", err)
		}
		stamp[i] = fi.ModTime()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current != nil && stamp == c.stamp {
		return c.current, nil
	}
	pair, err := tls.LoadX509KeyPair(c.cert, c.key)
	if err != nil {
		if c.current != nil {
			return c.current, nil
		}
		return nil, fmt.Errorf("api.tls: cert_file %s and key_file %s: %w", c.cert, c.key, err)
	}
	c.current, c.stamp = &pair, stamp
	return c.current, nil
}

// config is the server's TLS configuration: TLS 1.2 at least, the
// certificate from get.
func (c *certFiles) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return c.get() }}
}
