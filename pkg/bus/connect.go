package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/redact"
)

// Auth is how a connection authenticates to NATS and secures its
// transport; the zero value sends nothing (or what the URL carries) over
// plain TCP (or what the URL's scheme asks for).
type Auth struct {
	// CredentialsFile is a NATS credentials file (JWT and nkey seed).
	CredentialsFile string
	// TokenFile holds a token (the embedded dev server's .mcpbus/nats.token).
	TokenFile string
	// User and Password are a NATS user of the server's accounts.conf (a
	// service's own user, ServiceUser); empty: none.
	User, Password string
	// InboxPrefix replaces nats.go's "_INBOX" in this connection's reply
	// inboxes, so NATS permissions can give each service its own
	// (Names.ServiceInbox); empty: the default.
	InboxPrefix string
	// TLS secures the connection (nats.tls); the zero value leaves the
	// transport to the URL's scheme (tls:// verifies against the system
	// roots).
	TLS TLS
	// InProcess, when set, connects to a NATS server running in this
	// process through an in-memory pipe instead of the URL's TCP socket
	// (dev mode: no loopback write(2)/read(2) per message). The URL is
	// still given for errors.
	InProcess nats.InProcessConnProvider
}

// TLS is a NATS client's transport security (config.yaml nats.tls).
type TLS struct {
	// CAFile is a PEM bundle of the certificate authorities the client
	// verifies the server against (instead of the system roots); setting
	// it turns TLS on.
	CAFile string
	// CertFile and KeyFile are the client's own certificate and key, for a
	// server that asks for one (mutual TLS); both or neither.
	CertFile, KeyFile string
}

// Enabled reports whether any TLS setting is given.
func (t TLS) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// Options returns the nats.go options of a.
func (a Auth) Options() ([]nats.Option, error) {
	var opts []nats.Option
	if a.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(a.CredentialsFile))
	}
	if a.TokenFile != "" {
		b, err := os.ReadFile(a.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("read nats token file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return nil, fmt.Errorf("nats token file %s is empty", a.TokenFile)
		}
		opts = append(opts, nats.Token(tok))
	}
	if a.User != "" {
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	}
	if a.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(a.InboxPrefix))
	}
	if a.TLS.Enabled() {
		if (a.TLS.CertFile == "") != (a.TLS.KeyFile == "") {
			return nil, errors.New("nats.tls: cert_file and key_file go together (mutual TLS): set both or neither")
		}
		for field, f := range map[string]string{"ca_file": a.TLS.CAFile, "cert_file": a.TLS.CertFile, "key_file": a.TLS.KeyFile} {
			if f == "" {
				continue
			}
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("nats.tls.%s: %w", field, err)
			}
		}
		// The server is always verified: against CAFile when given, else
		// the system roots.
		opts = append(opts, nats.Secure())
		if a.TLS.CAFile != "" {
			opts = append(opts, nats.RootCAs(a.TLS.CAFile))
		}
		if a.TLS.CertFile != "" {
			opts = append(opts, nats.ClientCert(a.TLS.CertFile, a.TLS.KeyFile))
		}
	}
	if a.InProcess != nil {
		opts = append(opts, nats.InProcessServer(a.InProcess))
	}
	return opts, nil
}

// redactURLs is a NATS URL list ("u1,u2") without credentials, for errors.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		parts[i] = redact.URL(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

// Connect dials NATS with reconnects forever, logging disconnects. The
// connection keeps no reconnect buffer (see WaitConnected).
func Connect(natsURL, name string, auth Auth, log *slog.Logger) (*nats.Conn, error) {
	authOpts, err := auth.Options()
	if err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(false),
		nats.ReconnectWait(250 * time.Millisecond),
		// No reconnect buffer: a message published while the connection is
		// away fails at once (nats.ErrReconnectBufExceeded) instead of
		// being kept and delivered once it is back, when a request's
		// caller may have given up on it (and retried: a tool run twice).
		// Requests wait for the reconnection instead (WaitConnected);
		// audit records, task events and heartbeats are retried by their
		// writers.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", "error", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { log.Info("nats reconnected", "url", c.ConnectedUrlRedacted()) }),
	}
	nc, err := nats.Connect(natsURL, append(opts, authOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("connect to nats at %s: %w", redactURLs(natsURL), err)
	}
	watchOf(nc) // its drops and reconnections are followed from the start (request.go)
	return nc, nil
}

// JetStreamSetup creates (or updates) the KV buckets and the events stream
// the services of the deployment n share, each kept by replicas servers of
// the cluster (0 is auto, see StreamReplicas), and returns the config
// bucket. Safe to call from every replica at once.
func JetStreamSetup(ctx context.Context, js jetstream.JetStream, n Names, replicas int) (jetstream.KeyValue, error) {
	replicas = StreamReplicas(js, replicas)
	kv, err := js.CreateOrUpdateKeyValue(ctx, configBucketConfig(n, replicas))
	if err != nil {
		return nil, fmt.Errorf("create kv bucket %s: %w", n.ConfigBucket(), err)
	}
	if _, err := PresenceKV(ctx, js, n, replicas); err != nil {
		return nil, err
	}
	_, err = js.CreateOrUpdateStream(ctx, eventsStreamConfig(n, replicas))
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", n.EventsStream(), err)
	}
	return kv, nil
}

func configBucketConfig(n Names, replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket: n.ConfigBucket(), History: 1, Storage: jetstream.FileStorage, Replicas: replicas,
		Description: "mcpbus shared config and cache generation",
	}
}

func eventsStreamConfig(n Names, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name: n.EventsStream(), Subjects: []string{n.EventsAll()},
		Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute, Replicas: replicas,
		MaxAge: 7 * 24 * time.Hour,
	}
}

// PresenceKV returns the presence bucket of the deployment n, creating it when missing (kept by
// replicas servers, 0 meaning auto): one value per key, entries dropped a
// minute after their last heartbeat, on file storage so that a NATS server
// restart keeps it. An existing bucket
// is used as it is (its settings are not essential, and JetStream refuses
// some changes, such as the storage type). Safe to call from every replica
// at once.
func PresenceKV(ctx context.Context, js jetstream.JetStream, n Names, replicas int) (jetstream.KeyValue, error) {
	bucket := n.PresenceBucket()
	for attempt := 1; ; attempt++ {
		kv, err := js.KeyValue(ctx, bucket)
		if err == nil {
			return kv, nil
		}
		if !errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("open kv bucket %s: %w", bucket, err)
		}
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: bucket, History: 1, Storage: jetstream.FileStorage, TTL: time.Minute, Replicas: StreamReplicas(js, replicas),
			Description: "mcpbus replicas' heartbeats",
		})
		if createRaced(err) && attempt < 3 {
			continue // another replica created it first
		}
		if err != nil {
			return nil, fmt.Errorf("create kv bucket %s: %w", bucket, err)
		}
		return kv, nil
	}
}

// ReadGeneration returns the current cache generation and its KV revision
// (0, 0 when none was ever written).
func ReadGeneration(ctx context.Context, kv jetstream.KeyValue) (gen int64, rev uint64, err error) {
	e, err := kv.Get(ctx, KVKeyGen)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read generation: %w", err)
	}
	if _, err := fmt.Sscan(string(e.Value()), &gen); err != nil {
		return 0, 0, fmt.Errorf("generation value %q: %w", e.Value(), err)
	}
	return gen, e.Revision(), nil
}

// BumpGeneration increments the cache generation with compare-and-set,
// retrying on contention, and returns the new value. A read or write the
// bucket does not answer (its leader lost with a cut-off or failed node
// while the remaining copies elect another) is tried again, with backoff,
// until ctx ends: a majority of the bucket's copies is enough to reset.
func BumpGeneration(ctx context.Context, kv jetstream.KeyValue) (int64, error) {
	wait := 50 * time.Millisecond
	for {
		gen, err := bumpOnce(ctx, kv)
		switch {
		case err == nil:
			return gen, nil
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
			// Another reset won the race: read again.
		case transientKVError(err) && ctx.Err() == nil:
			// A write may have been stored with its answer lost: the next
			// read then sees it and the compare-and-set raises it once
			// more, which is harmless (generations only go up).
			if !pause(ctx, &wait) {
				return 0, err
			}
			continue
		default:
			return 0, err
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
}

// bumpAttempt bounds one read and compare-and-set of BumpGeneration, so a
// request lost with a leader is tried again before the caller's deadline.
const bumpAttempt = 2 * time.Second

// bumpOnce reads the generation and writes the next one if the key is
// still at the revision read.
func bumpOnce(ctx context.Context, kv jetstream.KeyValue) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, bumpAttempt)
	defer cancel()
	gen, rev, err := ReadGeneration(ctx, kv)
	if err != nil {
		return 0, err
	}
	next := []byte(fmt.Sprint(gen + 1))
	if rev == 0 {
		_, err = kv.Create(ctx, KVKeyGen, next)
	} else {
		_, err = kv.Update(ctx, KVKeyGen, next, rev)
	}
	if err != nil {
		return 0, fmt.Errorf("bump generation: %w", err)
	}
	return gen + 1, nil
}

// transientKVError reports whether a KV read or write failed for want of
// an answer (no leader for the moment, a request lost) rather than being
// refused: trying again may succeed.
func transientKVError(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled)
}

// pause waits *wait (doubling it, up to a second) and reports whether ctx
// still has time for another attempt.
func pause(ctx context.Context, wait *time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(*wait):
	}
	*wait = min(2**wait, time.Second)
	return ctx.Err() == nil
}

// createRaced reports whether creating a bucket failed because another
// replica created it at the same moment: JetStream answers the loser
// "bucket exists", or, on servers before 2.10, sometimes "subjects overlap
// with an existing stream" (error code 10065) for the same bucket.
func createRaced(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) ||
		errors.As(err, &api) && api.ErrorCode == jsErrCodeSubjectOverlap
}

// jsErrCodeSubjectOverlap is JetStream's error code for a stream whose
// subjects overlap an existing stream's (nats.go names no constant for it).
const jsErrCodeSubjectOverlap jetstream.ErrorCode = 10065
