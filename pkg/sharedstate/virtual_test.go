package sharedstate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/sharedstate"
	"github.com/mcpbus/mcpbus/pkg/testkit"
)

// TestUpdateVirtualLosesNoWrite: eight writers adding a set each at once
// all land (compare-and-set, read again on a lost race); an edit's error
// writes nothing; a watcher sees the record and its revision.
func TestUpdateVirtualLosesNoWrite(t *testing.T) {
	t.Parallel()
	b := testkit.StartBus(t)
	w := startWatcher(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sharedstate.UpdateVirtual(ctx, b.KV, func(rec sharedstate.VirtualRecord) (sharedstate.VirtualRecord, error) {
				rec.VirtualServers = append(rec.VirtualServers, config.VirtualServer{Name: fmt.Sprintf("s%d", i), Servers: []string{"demo"}})
				return rec, nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rec, rev, err := sharedstate.ReadVirtual(ctx, b.KV)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, vs := range rec.VirtualServers {
		got = append(got, vs.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}) {
		t.Fatalf("after 8 concurrent writers: %v", got)
	}
	refused := errors.New("refused")
	if _, err := sharedstate.UpdateVirtual(ctx, b.KV, func(sharedstate.VirtualRecord) (sharedstate.VirtualRecord, error) {
		return sharedstate.VirtualRecord{}, refused
	}); !errors.Is(err, refused) {
		t.Fatalf("an edit's error: %v", err)
	}
	if _, again, _ := sharedstate.ReadVirtual(ctx, b.KV); again != rev {
		t.Errorf("a refused edit wrote (revision %d, was %d)", again, rev)
	}
	testkit.Eventually(t, 30*time.Second, "the watcher to see the record", func() bool {
		snap := w.Current()
		return snap.VirtualRevision == rev && len(snap.VirtualServers) == 8
	})
}
