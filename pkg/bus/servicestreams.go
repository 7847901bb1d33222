package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// StreamsOf lists the JetStream streams (a KV bucket is the stream
// "KV_<bucket>") that service (a base name such as ServiceToolcall) uses:
// the ones its NATS user may manage in deploy/nats/accounts.conf, and the
// ones it keeps at nats.replicas (ReconcileAtStart). An unknown name
// (a test, an operator tool) gets every stream of the deployment.
func (n Names) StreamsOf(service string) []string {
	config, presence := "KV_"+n.ConfigBucket(), "KV_"+n.PresenceBucket()
	switch service {
	case ServiceTokens:
		return []string{config, "KV_" + n.OAuthBucket(), "KV_" + n.OAuthStatesBucket(), n.AuditStream()}
	case ServiceDiscovery:
		return []string{config, presence, n.EventsStream()}
	case ServiceToolcall:
		return []string{config, presence, "KV_" + n.QuotasBucket(), n.AuditStream()}
	case ServiceTaskpoller:
		return []string{n.EventsStream()}
	case ServiceAPI:
		return []string{config, "KV_" + n.MCPSessionsBucket(), "KV_" + n.MCPPromotionsBucket(),
			"KV_" + n.MCPStatesBucket(), "KV_" + n.ConsoleSessionsBucket(), n.AuditStream()}
	}
	return n.Streams()
}

// ReconcileAtStart is StreamsOf(service) less the buckets whose openers
// bring them to nats.replicas themselves, together with their TTL
// (MCPSessionsKV, MCPPromotionsKV, MCPStatesKV, ConsoleSessionsKV,
// QuotasKV, OAuthKV, OAuthStatesKV): what a service keeps at
// nats.replicas when it connects (ReconcileReplicas).
func (n Names) ReconcileAtStart(service string) []string {
	self := map[string]bool{"KV_" + n.MCPSessionsBucket(): true, "KV_" + n.MCPPromotionsBucket(): true, "KV_" + n.MCPStatesBucket(): true,
		"KV_" + n.ConsoleSessionsBucket(): true, "KV_" + n.QuotasBucket(): true, "KV_" + n.OAuthBucket(): true, "KV_" + n.OAuthStatesBucket(): true}
	var out []string
	for _, s := range n.StreamsOf(service) {
		if !self[s] {
			out = append(out, s)
		}
	}
	return out
}

// SetupFor is JetStreamSetup for one service: it creates (or updates) only
// the shared config bucket and events stream among StreamsOf(service), so
// a service's NATS user needs no right on the others. It returns the
// config bucket, nil for a service that does not use it (the task poller).
// The presence, session and audit streams are set up where they are
// opened (PresenceKV, MCPSessionsKV, audit.EnsureStream).
func SetupFor(ctx context.Context, js jetstream.JetStream, n Names, service string, replicas int) (jetstream.KeyValue, error) {
	uses := map[string]bool{}
	for _, s := range n.StreamsOf(service) {
		uses[s] = true
	}
	replicas = StreamReplicas(js, replicas)
	var kv jetstream.KeyValue
	if uses["KV_"+n.ConfigBucket()] {
		var err error
		kv, err = js.CreateOrUpdateKeyValue(ctx, configBucketConfig(n, replicas))
		if err != nil {
			return nil, fmt.Errorf("create kv bucket %s: %w", n.ConfigBucket(), err)
		}
	}
	if uses[n.EventsStream()] {
		if _, err := js.CreateOrUpdateStream(ctx, eventsStreamConfig(n, replicas)); err != nil {
			return nil, fmt.Errorf("create stream %s: %w", n.EventsStream(), err)
		}
	}
	return kv, nil
}
