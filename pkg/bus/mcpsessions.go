package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MCPSessionsKV returns the MCP session bucket of n (Names.MCPSessionsBucket),
// creating it when missing: one value per key, an entry dropped idle after
// its last write (the session idle timeout), kept by replicas servers (0
// meaning auto) on file storage so a NATS restart keeps sessions. An existing
// bucket whose TTL differs is updated to idle (every api replica should be
// configured alike; the last to start wins). Safe to call from every
// replica at once.
func MCPSessionsKV(ctx context.Context, js jetstream.JetStream, n Names, replicas int, idle time.Duration) (jetstream.KeyValue, error) {
	return ttlKV(ctx, js, jetstream.KeyValueConfig{
		Bucket: n.MCPSessionsBucket(), History: 1, Storage: jetstream.FileStorage, TTL: idle, Replicas: StreamReplicas(js, replicas),
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

// ttlKV opens cfg.Bucket or creates it, and sets its TTL to cfg.TTL.
func ttlKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) {
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
	if st.TTL() != cfg.TTL {
		if kv, err = js.UpdateKeyValue(ctx, cfg); err != nil {
			return nil, fmt.Errorf("update kv bucket %s ttl to %s: %w", cfg.Bucket, cfg.TTL, err)
		}
	}
	return kv, nil
}
