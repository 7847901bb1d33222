package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/audit"
	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// partitionDown is how long the full suite keeps the node cut off: past
// the task lease (LeaseSeconds), so the other poller takes over the cut
// poller's tasks, and past the call timeout.
const partitionDown = 20 * time.Second

// partitionCallers is the partition's load: callers each making a call
// every 200 ms.
const partitionCallers = 16

// runPartition runs a deployment on a three-node NATS cluster whose nodes
// live in network namespaces of their own: n1 and n2 serve tokens,
// discovery, api, toolcall-1 and taskpoller-1 (in the root namespace), n3
// serves toolcall-2 and taskpoller-2 (in n3's namespace, reaching only n3
// and, through the bridge, PostgreSQL and the upstreams). Under load it cuts
// n3's namespace off (a link down: every process keeps running), resets
// the catalog cache on the majority side, heals the link and returns the
// window's row; it fails the test when a call hung, a task was lost or
// polled twice, an answered call has no audit record, or a stream's copy
// on n3 did not catch up with the generation reset during the cut.
func runPartition(t *testing.T) Row {
	root := t.TempDir()
	x, err := NewNet(3)
	if err != nil {
		t.Fatalf("network namespaces: %v", err)
	}
	t.Cleanup(func() {
		if err := x.Close(); err != nil {
			t.Errorf("remove the network namespaces: %v", err)
		}
	})
	cluster, err := StartNetCluster(x, root)
	t.Cleanup(func() {
		cluster.Stop()
		if t.Failed() {
			for _, p := range cluster.Nodes {
				t.Logf("--- %s ---\n%s", p.Name, tail(p.Output(), 4000))
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	pgRoot, err := os.MkdirTemp("", "mcpbus-chaos-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(pgRoot) })
	pg, err := StartPostgresOn(pgRoot, x.Gateway, x.Subnet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	dbURL, drop, err := FreshSchema(strings.Replace(pg.URL, "127.0.0.1", x.Gateway, 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)

	d, err := NewDeploymentOn(bins, root, &NATSServer{URL: cluster.URL(0, 1)}, dbURL, x.Gateway)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		if t.Failed() {
			for _, name := range ServiceProcs {
				t.Logf("--- %s ---\n%s", name, tail(d.Procs[name].Output(), 6000))
			}
		}
	})
	const cut = 2 // n3
	d.NATSReplicas = 3
	d.NATSURLOf = map[string]string{}
	for _, name := range []string{"toolcall-2", "taskpoller-2"} {
		d.NATSURLOf[name] = fmt.Sprintf("nats://127.0.0.1:%d", netClientPort)
		x.Run(cut, d.Procs[name])
	}
	if err := d.writeConfig(); err != nil {
		t.Fatal(err)
	}
	// The shared buckets and streams first, with a patient deadline: seven
	// processes creating three-replica streams at once on two shared cores
	// outwait the services' start deadline.
	js, err := jetstream.New(d.NC())
	if err != nil {
		t.Fatal(err)
	}
	setupCtx, setupCancel := context.WithTimeout(context.Background(), 2*time.Minute)
	_, err = bus.JetStreamSetup(setupCtx, js, d.names, 3)
	if err == nil {
		// The audit stream too (its writer creates it).
		var w *audit.Writer
		if w, err = audit.NewWriter(setupCtx, d.NC(), d.names, audit.WriterOptions{Settings: config.DefaultAudit(), Replicas: 3, Log: slog.New(slog.DiscardHandler)}); err == nil {
			err = w.Close(setupCtx)
		}
	}
	setupCancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.StartServices(Services); err != nil {
		t.Fatal(err)
	}
	if err := d.WaitReady(180 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Log("deployment ready; cutting n3 off under load")

	load := StartLoad(d, partitionCallers, 200*time.Millisecond, 500*time.Millisecond)
	s := &Suite{D: d, Load: load, Baseline: 2 * time.Second, Settle: 3 * time.Second,
		ReadyTimeout: 180 * time.Second, TaskTimeout: 120 * time.Second}
	gen := make(chan int64, 1)
	fault := Partition(cluster, cut, partitionDown)
	inject := fault.Inject
	fault.Inject = func(s *Suite) error {
		// The cut side misses a cache reset made on the majority side.
		go func() {
			time.Sleep(partitionDown / 2)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := bus.Request[bus.CacheResetReply](ctx, d.NC(), d.names.CacheReset(), bus.CacheResetRequest{Reason: "partition"})
			if err != nil {
				t.Errorf("cache reset during the partition: %v", err)
			}
			gen <- r.Generation
		}()
		return inject(s)
	}
	row := s.Run(fault)
	load.Stop()
	t.Log("healed; checking audit and convergence")
	t.Logf("%s: %d calls, %d ok, %d failed cleanly, %d hung; tasks %d/%d/%d; %d dup polls; recovery %s %s",
		row.Fault, row.Calls, row.OK, row.FailedClean, row.Hung, row.Submitted, row.Completed, row.Lost, row.DupPolls,
		row.Recovery.Round(100*time.Millisecond), row.Err)
	for _, h := range row.HungCalls {
		t.Logf("  hung: %s", h)
	}
	if bad := row.Failed(); len(bad) > 0 {
		t.Errorf("%s: %s", row.Fault, strings.Join(bad, "; "))
	}
	want := <-gen

	// Every answered call of the run has its audit record, written by
	// whichever toolcall replica served it, also the cut one.
	var answered []string
	outcomes, _ := load.Window(time.Time{}, time.Now())
	for _, o := range outcomes {
		if o.Code == "" && o.Kind != "submit" {
			answered = append(answered, o.ID)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var missing []string
	waitFor(t, 2*time.Minute, "every answered call's audit record", func() bool {
		ids, err := AuditedRequestIDs(ctx, d.NC())
		if err != nil {
			t.Logf("audit: %v", err)
			return false
		}
		missing = missing[:0]
		for _, id := range answered {
			if !ids[id] {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	}, func() string {
		return fmt.Sprintf("%d of %d answered calls without an audit record, e.g. %v", len(missing), len(answered), missing[:min(5, len(missing))])
	})
	row.AuditLost = len(missing)

	// n3 (reached alone) serves the generation reset during the cut, and
	// every stream's copy on it is current.
	nc3, err := nats.Connect(cluster.URL(cut), nats.Name("chaos-partition-n3"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc3.Close()
	js3, err := jetstream.New(nc3)
	if err != nil {
		t.Fatal(err)
	}
	var lagging string
	waitFor(t, 2*time.Minute, "n3's copies to converge", func() bool {
		kv, err := js3.KeyValue(ctx, d.names.ConfigBucket())
		if err != nil {
			lagging = err.Error()
			return false
		}
		got, _, err := bus.ReadGeneration(ctx, kv)
		if err != nil {
			lagging = err.Error()
			return false
		}
		if got < want {
			lagging = fmt.Sprintf("generation %d on n3, %d reset during the partition", got, want)
			return false
		}
		for _, name := range d.names.Streams() {
			st, err := js3.Stream(ctx, name)
			if err != nil {
				continue // made on first use
			}
			info, err := st.Info(ctx)
			if err != nil || info.Cluster == nil {
				lagging = fmt.Sprintf("stream %s: %v", name, err)
				return false
			}
			if len(info.Cluster.Replicas) != 2 {
				lagging = fmt.Sprintf("stream %s: %d followers", name, len(info.Cluster.Replicas))
				return false
			}
			for _, r := range info.Cluster.Replicas {
				if !r.Current || r.Lag > 0 {
					lagging = fmt.Sprintf("stream %s: %s current %v lag %d", name, r.Name, r.Current, r.Lag)
					return false
				}
			}
		}
		return true
	}, func() string { return lagging })
	return row
}

// waitFor polls cond until it holds or timeout passes, then fails the test
// with why().
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool, why func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("%s: not after %s: %s", what, timeout, why())
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}
