package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
)

// NetCluster is a three-node NATS cluster whose nodes run in the
// namespaces of a Net, on the same ports in each (a namespace has its own
// port space). Clients are not told of the other nodes (no_advertise): a
// process reaches the nodes it was given.
type NetCluster struct {
	Net   *Net
	Nodes []*Proc
}

// NATS ports inside every namespace.
const netClientPort, netRoutePort = 4222, 6222

// StartNetCluster starts one nats-server per member of x, its store under
// dir, and waits until each accepts connections. Routes are pinged every
// second (ping_max 3), so a cut route is noticed within seconds.
func StartNetCluster(x *Net, dir string) (*NetCluster, error) {
	c := &NetCluster{Net: x}
	var routes []string
	for _, m := range x.Members {
		routes = append(routes, fmt.Sprintf("nats-route://%s:%d", m.Addr, netRoutePort))
	}
	for i, m := range x.Members {
		name := fmt.Sprintf("n%d", i+1)
		conf := fmt.Sprintf(`server_name: %s
listen: 0.0.0.0:%d
ping_interval: "1s"
ping_max: 3
max_payload: 8MB
jetstream { store_dir: %q }
cluster {
  name: chaosnet
  listen: 0.0.0.0:%d
  no_advertise: true
  routes: [%s]
}
`, name, netClientPort, filepath.Join(dir, name), netRoutePort, strings.Join(routes, ", "))
		path := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			return c, err
		}
		p := &Proc{Name: "nats-" + name, Bin: PartitionNATSServer, Dir: dir, Args: []string{"-c", path}}
		x.Run(i, p)
		if err := p.Start(); err != nil {
			return c, err
		}
		c.Nodes = append(c.Nodes, p)
		if err := waitTCP(fmt.Sprintf("%s:%d", m.Addr, netClientPort), 20*time.Second); err != nil {
			return c, err
		}
	}
	return c, c.waitJetStream(60 * time.Second)
}

// waitJetStream waits until the cluster creates (and deletes) a stream with
// three replicas: its meta group has formed with every node.
func (c *NetCluster) waitJetStream(timeout time.Duration) error {
	nc, err := nats.Connect(c.URL(0, 1, 2), nats.Name("chaos-partition-probe"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CHAOS_PROBE", Subjects: []string{"chaos.probe"}, Replicas: 3})
		if err == nil {
			err = js.DeleteStream(ctx, "CHAOS_PROBE")
		}
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the NATS cluster has no JetStream with 3 replicas after %s: %w", timeout, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// URL is the client URL list of the nodes i… (from the root namespace).
func (c *NetCluster) URL(nodes ...int) string {
	var urls []string
	for _, i := range nodes {
		urls = append(urls, fmt.Sprintf("nats://%s:%d", c.Net.Members[i].Addr, netClientPort))
	}
	return strings.Join(urls, ",")
}

// Stop stops every node.
func (c *NetCluster) Stop() {
	for _, p := range c.Nodes {
		p.Stop(20 * time.Second)
	}
}

// Partition cuts member node of the suite's Net (its NATS node and the
// services attached to it) off for down, then heals it. The time from the
// cut until the other side dropped its routes to the node counts as a
// kill window: a request routed to the cut side in that time has no one
// who can answer it (NATS request-reply), and its requester's deadline
// ends it.
func Partition(c *NetCluster, node int, down time.Duration) Fault {
	return Fault{Name: fmt.Sprintf("network partition of NATS node n%d and its services (%s)", node+1, down), Inject: func(s *Suite) error {
		reaped := s.killed()
		if err := c.Net.Cut(node); err != nil {
			return err
		}
		// The surviving nodes notice the lost route by its pings (1s, 3
		// missed) and drop the cut side's subscriptions.
		time.Sleep(4 * time.Second)
		reaped()
		time.Sleep(max(down-4*time.Second, 0))
		return c.Net.Heal(node)
	}}
}

// AuditedRequestIDs reads every call record of the deployment's audit
// stream and returns their request ids.
func AuditedRequestIDs(ctx context.Context, nc *nats.Conn) (map[string]bool, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	var names bus.Names
	stream, err := js.Stream(ctx, names.AuditStream())
	if err != nil {
		return nil, fmt.Errorf("audit stream: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("audit stream: %w", err)
	}
	ids := map[string]bool{}
	if info.State.Msgs == 0 {
		return ids, nil
	}
	// Each record by its sequence from the stream's leader: a consumer
	// (an ordered one is a single copy) may be placed on the node that
	// was cut off and still catching up.
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("audit record %d of %d..%d: %w", seq, info.State.FirstSeq, info.State.LastSeq, err)
		}
		var r audit.Record
		if err := json.Unmarshal(msg.Data, &r); err == nil && r.Kind == audit.KindCall {
			ids[r.RequestID] = true
		}
	}
	return ids, nil
}
