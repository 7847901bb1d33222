package bus

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedOptions configures an embedded NATS server.
type EmbeddedOptions struct {
	// Host defaults to 127.0.0.1.
	Host string
	// Port defaults to DevPort; -1 picks a free port.
	Port int
	// StoreDir holds JetStream data; required.
	StoreDir string
	// MaxPayload is the largest message the server accepts; 0 means
	// DefaultMaxPayload.
	MaxPayload int32
	// Token, when set, is required from every client (`mcpbus dev` makes a
	// random one per start, see NewToken).
	Token string
}

// NewToken returns a random token for an embedded server (32 bytes, hex).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("embedded nats token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// DefaultMaxPayload is the embedded server's max_payload: 8 MiB (NATS'
// own default is 1 MiB, small for a tool result carrying an image or a
// catalog of a few thousand tools; 8 MiB is NATS' recommended ceiling).
const DefaultMaxPayload = 8 << 20

// DevPort is the embedded server's default port: not 4222, where a real NATS
// server may already listen.
const DevPort = 4322

// Embedded is a NATS server with JetStream running inside this process.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a NATS server with JetStream and waits until it
// accepts connections.
func StartEmbedded(o EmbeddedOptions) (*Embedded, error) {
	if o.StoreDir == "" {
		return nil, fmt.Errorf("embedded nats: StoreDir is required")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = DevPort
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.Port > 0 {
		// The server's own listen error is only logged (and logging is
		// off): try the port first so that a taken one is reported as such
		// (the error wraps syscall.EADDRINUSE).
		addr := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("embedded nats: %w", err)
		}
		_ = ln.Close()
	}
	srv, err := server.NewServer(&server.Options{
		ServerName: "mcpbus-dev", Host: o.Host, Port: o.Port,
		JetStream: true, StoreDir: o.StoreDir,
		JetStreamMaxMemory: 64 << 20, JetStreamMaxStore: 1 << 30,
		MaxPayload:    o.MaxPayload,
		Authorization: o.Token,
		NoLog:         true, NoSigs: true,
	})
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready for connections on %s:%d", o.Host, o.Port)
	}
	return &Embedded{srv: srv}, nil
}

// URL is the client URL of the server.
func (e *Embedded) URL() string { return e.srv.ClientURL() }

// InProcess is what [Auth.InProcess] takes to connect to this server
// without a socket.
func (e *Embedded) InProcess() nats.InProcessConnProvider { return e.srv }

// Shutdown stops the server and waits for it.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
