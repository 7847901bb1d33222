package testkit

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The NATS server of TEST_NATS_URL outlives every test run (CI reuses the
// machine's), so what a test creates there must not stay: a test's
// namespace is removed when the test ends (RandomNames), and a run starts by
// removing what runs that died left behind (SweepStaleNamespaces). Left
// alone, each api start reserves its MCP sessions bucket's max_bytes, and a
// few hundred leftover namespaces fill the server's storage until every
// new bucket is refused.

// testNamespace matches the streams of a RandomNames namespace: its own
// (<ns>_…) and its buckets' (KV_<ns>_…, OBJ_<ns>_…).
var testNamespace = regexp.MustCompile(`^(?:KV_|OBJ_)?(t[0-9a-f]{12})_`)

// removeNamespaceOnSharedNATS deletes, when the test ends, every stream of
// namespace on the server of TEST_NATS_URL (none when it is unset).
func removeNamespaceOnSharedNATS(t testing.TB, namespace string) {
	url := os.Getenv("TEST_NATS_URL")
	if url == "" {
		return
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := deleteStreams(ctx, url, func(name string, _ time.Time) bool {
			m := testNamespace.FindStringSubmatch(name)
			return m != nil && m[1] == namespace
		}); err != nil {
			t.Logf("removing namespace %s from %s: %v", namespace, url, err)
		}
	})
}

// SweepStaleNamespaces deletes the streams of test namespaces older than
// age on the server at url: what earlier runs left when they died before
// their cleanups. Only RandomNames' namespaces are touched. It returns how
// many streams it deleted.
func SweepStaleNamespaces(url string, age time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return deleteStreams(ctx, url, func(name string, created time.Time) bool {
		return testNamespace.MatchString(name) && time.Since(created) > age
	})
}

// deleteStreams deletes the streams at url for which match is true.
func deleteStreams(ctx context.Context, url string, match func(name string, created time.Time) bool) (int, error) {
	nc, err := nats.Connect(url, nats.Name("mcpbus test cleanup"))
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err
	}
	var names []string
	list := js.ListStreams(ctx)
	for info := range list.Info() {
		if match(info.Config.Name, info.Created) {
			names = append(names, info.Config.Name)
		}
	}
	if err := list.Err(); err != nil {
		return 0, fmt.Errorf("list streams: %w", err)
	}
	deleted := 0
	var failed []string
	for _, name := range names {
		if err := js.DeleteStream(ctx, name); err != nil && !strings.Contains(err.Error(), "not found") {
			failed = append(failed, name+": "+err.Error())
			continue
		}
		deleted++
	}
	if len(failed) > 0 {
		return deleted, fmt.Errorf("delete streams: %s", strings.Join(failed, "; "))
	}
	return deleted, nil
}
