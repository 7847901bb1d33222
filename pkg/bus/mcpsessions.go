package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxMCPSessionBytes is the largest session the session bucket stores
// (its MaxValueSize): a session's client-supplied fields are capped at
// 1 KiB each (mcpserver.MaxSessionFieldBytes), so a real one is far
// smaller.
const MaxMCPSessionBytes = 16 * 1024

// MCPSessionsKV returns the MCP session bucket of n (Names.MCPSessionsBucket),
// creating it when missing: one value per key, an entry dropped idle after
// its last write (the session idle timeout), kept by replicas servers (0
// meaning auto) on file storage so a NATS restart keeps sessions, at most
// maxBytes in all and MaxMCPSessionBytes per session (every api replica
// mirrors the bucket in memory). An existing bucket whose TTL or limits
// differ is updated (every api replica should be configured alike; the
// last to start wins). Safe to call from every replica at once.
func MCPSessionsKV(ctx context.Context, js jetstream.JetStream, n Names, replicas int, idle time.Duration, maxBytes int64) (jetstream.KeyValue, error) {
	return ttlKV(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.MCPSessionsBucket(), History: 1, Storage: jetstream.FileStorage, TTL: idle, Replicas: StreamReplicas(js, replicas),
		MaxBytes: maxBytes, MaxValueSize: MaxMCPSessionBytes,
		Description: "mcpbus MCP endpoint sessions",
	})
}

// MCPPromotionsKV returns the tool_search promotion bucket
// of n (Names.MCPPromotionsBucket), as MCPSessionsKV does: an entry is dropped ttl
// after its last write.
func MCPPromotionsKV(ctx context.Context, js jetstream.JetStream, n Names, replicas int, ttl time.Duration) (jetstream.KeyValue, error) {
	return ttlKV(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.MCPPromotionsBucket(), History: 1, Storage: jetstream.FileStorage, TTL: ttl, Replicas: StreamReplicas(js, replicas),
		Description: "mcpbus MCP endpoint tool_search promotions",
	})
}

// MCPStatesKV returns the bucket of used sealed requestStates of n
// (Names.MCPStatesBucket), as MCPSessionsKV does: an entry is dropped ttl
// after it was written (the states' lifetime), and the api replicas share
// it so that a state opens once whichever replica receives it.
func MCPStatesKV(ctx context.Context, js jetstream.JetStream, n Names, replicas int, ttl time.Duration) (jetstream.KeyValue, error) {
	return ttlKV(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.MCPStatesBucket(), History: 1, Storage: jetstream.FileStorage, TTL: ttl, Replicas: StreamReplicas(js, replicas),
		Description: "mcpbus MCP endpoint used request states",
	})
}

// QuotaWindowTTL is how long a quota window's counter is kept after its
// last write: longer than the longest window (a day).
const QuotaWindowTTL = 25 * time.Hour

// QuotasKV returns the quota bucket of n (Names.QuotasBucket), as
// MCPSessionsKV does: a window's counter is dropped QuotaWindowTTL after
// its last write, long after the window ended.
func QuotasKV(ctx context.Context, js jetstream.JetStream, n Names, replicas int) (jetstream.KeyValue, error) {
	return ttlKV(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.QuotasBucket(), History: 1, Storage: jetstream.FileStorage, TTL: QuotaWindowTTL, Replicas: StreamReplicas(js, replicas),
		Description: "mcpbus virtual server quota windows",
	})
}

// ConsoleSessionsKV returns the console session bucket of n
// (Names.ConsoleSessionsBucket), as MCPSessionsKV does: an entry is dropped
// ttl after it was written (a sign-in's lifetime).
func ConsoleSessionsKV(ctx context.Context, js jetstream.JetStream, n Names, replicas int, ttl time.Duration) (jetstream.KeyValue, error) {
	return ttlKV(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.ConsoleSessionsBucket(), History: 1, Storage: jetstream.FileStorage, TTL: ttl, Replicas: StreamReplicas(js, replicas),
		MaxValueSize: 4096, Description: "mcpbus console sign-in sessions",
	})
}

// ttlKV opens cfg.Bucket or creates it, and sets its TTL to cfg.TTL, its
// replicas to cfg.Replicas and its size limits to cfg's (when set), in one
// update (so ReconcileAtStart leaves these buckets out).
func ttlKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg)
		if err == nil {
			// Created with cfg: nothing to reconcile, and no status read
			// that a freshly formed cluster may not answer yet.
			return kv, nil
		}
		if createRaced(err) {
			kv, err = js.KeyValue(ctx, cfg.Bucket) // another replica created it first
		}
	}
	if err != nil {
		return nil, fmt.Errorf("open kv bucket %s: %w", cfg.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("kv bucket %s status: %w", cfg.Bucket, err)
	}
	stale := st.TTL() != cfg.TTL
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		// The replicas too: one update brings a bucket to nats.replicas
		// and its TTL and limits (a second update while the first still
		// moves copies between servers may time out).
		sc := bs.StreamInfo().Config
		stale = stale || cfg.Replicas > 0 && sc.Replicas != cfg.Replicas ||
			cfg.MaxBytes > 0 && sc.MaxBytes != cfg.MaxBytes || cfg.MaxValueSize > 0 && sc.MaxMsgSize != cfg.MaxValueSize
	}
	if stale {
		if kv, err = js.UpdateKeyValue(ctx, cfg); err != nil {
			return nil, fmt.Errorf("update kv bucket %s ttl to %s and limits: %w", cfg.Bucket, cfg.TTL, err)
		}
	}
	return kv, nil
}
