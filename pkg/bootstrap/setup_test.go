package bootstrap

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// signalHandler closes fired at the first record whose message is msg.
type signalHandler struct {
	slog.Handler
	msg   string
	once  *sync.Once
	fired chan struct{}
}

func (h signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.fired) })
	}
	return h.Handler.Handle(ctx, r)
}

// A service that starts while its JetStream cannot create three-copy
// streams yet (two of the cluster's three servers are down: no meta
// leader) keeps trying until the cluster is back, instead of exiting on
// its first timeout: ConnectNATS succeeds once the servers return, with
// the config bucket kept by three servers.
func TestConnectNATSWaitsForJetStream(t *testing.T) {
	t.Parallel()
	c := testkit.StartNATSCluster(t, 3)
	c.Nodes[1].Kill()
	c.Nodes[2].Kill()
	retried := make(chan struct{})
	log := slog.New(signalHandler{Handler: testkit.Logger(t).Handler(), msg: "jetstream setup failed; retrying", once: &sync.Once{}, fired: retried})
	s := config.DefaultSettings()
	s.NATS.URL = c.Nodes[0].URL
	s.NATS.Replicas = 3
	names, err := bus.NewNames("")
	if err != nil {
		t.Fatal(err)
	}
	rt := &Runtime{Settings: &s, Names: names, Log: log}
	done := make(chan error, 1)
	go func() { done <- rt.ConnectNATS(context.Background(), "mcpbus-discovery") }()
	// The first attempt failed and was logged; only then the servers
	// come back.
	select {
	case err := <-done:
		t.Fatalf("ConnectNATS returned before the cluster was back: %v", err)
	case <-retried:
	}
	c.Nodes[1].Start(t)
	c.Nodes[2].Start(t)
	if err := testkit.Receive(t, 3*time.Minute, "ConnectNATS to return", done); err != nil {
		t.Fatalf("ConnectNATS once the cluster was back: %v", err)
	}
	t.Cleanup(rt.Close)
	st, err := rt.KV.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Bucket() != names.ConfigBucket() {
		t.Errorf("config bucket %q, want %q", st.Bucket(), names.ConfigBucket())
	}
}

// A setup JetStream refuses for good (three replicas on a server outside
// any cluster) is not retried: the service exits at once, the error
// naming nats.replicas.
func TestConnectNATSRefusedSetupIsNotRetried(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	retried := make(chan struct{})
	log := slog.New(signalHandler{Handler: testkit.Logger(t).Handler(), msg: "jetstream setup failed; retrying", once: &sync.Once{}, fired: retried})
	s := config.DefaultSettings()
	s.NATS.URL = b.URL
	s.NATS.Replicas = 3
	rt := &Runtime{Settings: &s, Names: b.Names, Log: log}
	err := rt.ConnectNATS(context.Background(), "mcpbus-discovery")
	if err == nil {
		rt.Close()
		t.Fatal("three replicas on one server: ConnectNATS succeeded")
	}
	if !strings.Contains(err.Error(), "nats.replicas = 3") {
		t.Errorf("error %q does not name nats.replicas", err)
	}
	select {
	case <-retried:
		t.Error("a refused setup was retried")
	default:
	}
}
