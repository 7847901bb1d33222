package mcphttp

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/kvcache"
	"github.com/mcpbus/mcpbus/pkg/mcpserver"
)

// errNoSession is a session id the bucket does not hold (never issued,
// deleted, or expired) or that belongs to another user: both are 404 so a
// session id reveals nothing about other users' sessions.
var errNoSession = errors.New("mcp session not found")

// sessions keeps MCP sessions in a JetStream KV bucket whose TTL is the idle
// timeout. The key is the SHA-256 of the user and of the session id
// (sessionKey), so the bucket never holds a usable id and a user's
// sessions are one key filter. Reads go through a mirror of the bucket (pkg/kvcache)
// kept by a watch once Listen started it: a request of a known session
// costs no bus round trip, a session another replica created a moment ago
// is read from the bucket, and another replica's DELETE reaches the mirror
// with the watch. A user holds at most maxPerUser sessions: a new one
// past that retires the user's oldest (create).
type sessions struct {
	kv         jetstream.KeyValue
	cache      *kvcache.Cache[mcpserver.Session]
	idle       time.Duration
	maxPerUser int
	now        func() time.Time
}

// newSessions mirrors kv; a DELETE waits until every replica's mirror
// dropped the session (sync subject syncSubject on nc), so the next request
// of that id is a 404 whichever replica receives it.
func newSessions(kv jetstream.KeyValue, nc *nats.Conn, syncSubject string, idle time.Duration, maxPerUser int, now func() time.Time) *sessions {
	decode := func(b []byte) (mcpserver.Session, error) {
		var sess mcpserver.Session
		err := json.Unmarshal(b, &sess)
		return sess, err
	}
	return &sessions{kv: kv, idle: idle, maxPerUser: maxPerUser, now: now,
		cache: kvcache.New(kv, decode, kvcache.Options{TTL: idle, Now: now, NC: nc, SyncSubject: syncSubject})}
}

// sessionKey is the bucket key of user's session id: bus.Digest(user) "."
// bus.Digest(id).
func sessionKey(user, id string) string {
	var b [2*2*sha256.Size + 1]byte
	k := append(bus.AppendDigest(b[:0], user), '.')
	return string(bus.AppendDigest(k, id))
}

// load returns the session of id if user owns it.
func (s *sessions) load(ctx context.Context, id, user string) (*mcpserver.Session, error) {
	if id == "" {
		return nil, errNoSession
	}
	sess, ok, err := s.cache.Get(ctx, sessionKey(user, id))
	if err != nil {
		return nil, fmt.Errorf("read mcp session: %w", err)
	}
	if !ok || sess.UserID != user {
		return nil, errNoSession
	}
	sess.ID = id
	return &sess, nil
}

// create stores a new session, first retiring its user's oldest sessions
// so that the user keeps at most maxPerUser. Replicas creating sessions
// of one user at the same moment may each keep one more until the next
// create.
func (s *sessions) create(ctx context.Context, sess *mcpserver.Session) error {
	if err := s.retireOldest(ctx, sess.UserID); err != nil {
		return err
	}
	return s.store(ctx, sess)
}

// retireOldest removes user's oldest sessions until maxPerUser-1 are
// left.
func (s *sessions) retireOldest(ctx context.Context, user string) error {
	lister, err := s.kv.ListKeysFiltered(ctx, bus.Digest(user)+".*")
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return fmt.Errorf("list the user's mcp sessions: %w", err)
	}
	var keys []string
	if lister != nil {
		for k := range lister.Keys() {
			keys = append(keys, k)
		}
	}
	if len(keys) < s.maxPerUser {
		return nil
	}
	type aged struct {
		key     string
		created time.Time
	}
	held := make([]aged, 0, len(keys))
	for _, k := range keys {
		sess, ok, err := s.cache.Get(ctx, k)
		if err != nil {
			return fmt.Errorf("read mcp session: %w", err)
		}
		if ok {
			held = append(held, aged{k, sess.CreatedAt})
		}
	}
	slices.SortFunc(held, func(a, b aged) int { return a.created.Compare(b.created) })
	for _, old := range held[:max(len(held)-s.maxPerUser+1, 0)] {
		if err := s.cache.Purge(ctx, old.key); err != nil {
			return fmt.Errorf("retire mcp session: %w", err)
		}
	}
	return nil
}

// store writes sess, which restarts its idle timer.
func (s *sessions) store(ctx context.Context, sess *mcpserver.Session) error {
	sess.TouchedAt = s.now().UTC()
	b, err := json.Marshal(sess)
	if err != nil {
		return fmt.Errorf("encode mcp session: %w", err)
	}
	if err := s.cache.Put(ctx, sessionKey(sess.UserID, sess.ID), b, *sess); err != nil {
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
func (s *sessions) remove(ctx context.Context, sess *mcpserver.Session) error {
	if err := s.cache.Purge(ctx, sessionKey(sess.UserID, sess.ID)); err != nil {
		return fmt.Errorf("delete mcp session: %w", err)
	}
	return nil
}
