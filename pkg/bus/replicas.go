package bus

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MaxAutoReplicas caps nats.replicas: auto.
const MaxAutoReplicas = 3

// ClusterSize is how many servers the NATS cluster of nc has, as the
// servers announce one another's client URLs (1 outside a cluster).
func ClusterSize(nc *nats.Conn) int {
	if nc.ConnectedClusterName() == "" {
		return 1
	}
	hosts := map[string]bool{}
	for _, s := range nc.Servers() {
		if u, err := url.Parse(s); err == nil {
			hosts[u.Host] = true
		}
	}
	return max(len(hosts), 1)
}

// StreamReplicas resolves nats.replicas for the deployment js talks to: a
// configured count as it is, 0 (auto) as the cluster's size, at most
// MaxAutoReplicas.
func StreamReplicas(js jetstream.JetStream, configured int) int {
	if configured > 0 {
		return configured
	}
	return min(ClusterSize(js.Conn()), MaxAutoReplicas)
}

// Streams are the JetStream streams of every bucket and stream mcpbus
// creates for the deployment n (a KV bucket B is the stream KV_B).
func (n Names) Streams() []string {
	return []string{"KV_" + n.ConfigBucket(), "KV_" + n.PresenceBucket(), "KV_" + n.MCPSessionsBucket(),
		"KV_" + n.MCPPromotionsBucket(), "KV_" + n.MCPStatesBucket(), "KV_" + n.OAuthStatesBucket(), "KV_" + n.OAuthBucket(), n.EventsStream(), n.AuditStream()}
}

// ReconcileReplicas sets the replicas of every existing one of streams
// (streams of n: Names.Streams, or a service's Names.StreamsOf) to StreamReplicas(js, configured) and returns the streams
// it changed. A stream JetStream refuses to change keeps serving as it is;
// its error is in errs (for a warning). Streams not created yet are skipped
// (they are created with the right count). Safe to call from every replica
// at once.
func ReconcileReplicas(ctx context.Context, js jetstream.JetStream, n Names, streams []string, configured int) (changed []string, errs []error) {
	want := StreamReplicas(js, configured)
	for _, name := range streams {
		s, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %w", name, err))
			continue
		}
		cfg := s.CachedInfo().Config
		if cfg.Replicas == want {
			continue
		}
		from := cfg.Replicas
		cfg.Replicas = want
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			errs = append(errs, fmt.Errorf("stream %s: keeps %d replicas, not %d: %w", name, from, want, err))
			continue
		}
		if err := awaitCurrent(ctx, js, name, want); err != nil {
			errs = append(errs, fmt.Errorf("stream %s: %d replicas requested, not all current yet: %w", name, want, err))
			continue
		}
		changed = append(changed, fmt.Sprintf("%s (%d → %d)", name, from, want))
	}
	return changed, errs
}

// awaitCurrent waits until stream name has want copies, each current, so
// that what the caller does next (a service's first read or write of a
// bucket it just reconciled) meets a settled stream.
func awaitCurrent(ctx context.Context, js jetstream.JetStream, name string, want int) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		s, err := js.Stream(ctx, name)
		if err == nil {
			if c := s.CachedInfo().Cluster; c == nil && want == 1 || c != nil && c.Leader != "" && len(c.Replicas) == want-1 && allCurrent(c.Replicas) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func allCurrent(peers []*jetstream.PeerInfo) bool {
	for _, p := range peers {
		if !p.Current {
			return false
		}
	}
	return true
}
