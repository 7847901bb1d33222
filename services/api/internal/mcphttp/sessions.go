package mcphttp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/kvcache"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
)

// errNoSession is a session id the bucket does not hold (never issued,
// deleted, or expired) or that belongs to another user: both are 404 so a
// session id reveals nothing about other users' sessions.
var errNoSession = errors.New("mcp session not found")

// sessions keeps MCP sessions in a JetStream KV bucket whose TTL is the idle
// timeout. The key is the SHA-256 of the session id, so the bucket never
// holds a usable id. Reads go through a mirror of the bucket (pkg/kvcache)
// kept by a watch once Listen started it: a request of a known session
// costs no bus round trip, a session another replica created a moment ago
// is read from the bucket, and another replica's DELETE reaches the mirror
// with the watch.
type sessions struct {
	kv    jetstream.KeyValue
	cache *kvcache.Cache[mcpserver.Session]
	idle  time.Duration
	now   func() time.Time
}

// newSessions mirrors kv; a DELETE waits until every replica's mirror
// dropped the session (sync subject syncSubject on nc), so the next request
// of that id is a 404 whichever replica receives it.
func newSessions(kv jetstream.KeyValue, nc *nats.Conn, syncSubject string, idle time.Duration, now func() time.Time) *sessions {
	decode := func(b []byte) (mcpserver.Session, error) {
		var sess mcpserver.Session
		err := json.Unmarshal(b, &sess)
		return sess, err
	}
	return &sessions{kv: kv, idle: idle, now: now, cache: kvcache.New(kv, decode, kvcache.Options{TTL: idle, Now: now, NC: nc, SyncSubject: syncSubject})}
}

func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// load returns the session of id if user owns it.
func (s *sessions) load(ctx context.Context, id, user string) (*mcpserver.Session, error) {
	if id == "" {
		return nil, errNoSession
	}
	sess, ok, err := s.cache.Get(ctx, sessionKey(id))
	if err != nil {
		return nil, fmt.Errorf("read mcp session: %w", err)
	}
	if !ok || sess.UserID != user {
		return nil, errNoSession
	}
	sess.ID = id
	return &sess, nil
}

// store writes sess, which restarts its idle timer.
func (s *sessions) store(ctx context.Context, sess *mcpserver.Session) error {
	sess.TouchedAt = s.now().UTC()
	b, err := json.Marshal(sess)
	if err != nil {
		return fmt.Errorf("encode mcp session: %w", err)
	}
	if err := s.cache.Put(ctx, sessionKey(sess.ID), b, *sess); err != nil {
		return fmt.Errorf("store mcp session: %w", err)
	}
	return nil
}

// touch stores sess again when a quarter of the idle timeout has passed
// since its last write (or it changed), so an active session does not
// expire and an idle one costs no writes.
func (s *sessions) touch(ctx context.Context, sess *mcpserver.Session, changed bool) error {
	if !changed && s.now().Sub(sess.TouchedAt) < s.idle/4 {
		return nil
	}
	return s.store(ctx, sess)
}

// remove deletes the session (DELETE /mcp, or the end of an SSE stream).
func (s *sessions) remove(ctx context.Context, id string) error {
	if err := s.cache.Purge(ctx, sessionKey(id)); err != nil {
		return fmt.Errorf("delete mcp session: %w", err)
	}
	return nil
}
