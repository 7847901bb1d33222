package sharedstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
)

// VirtualRecord is the value of the KV key "virtual_servers": every
// virtual server made through the admin API, in one value, so a change is
// one compare-and-set write that every replica applies whole or not at
// all. config.yaml's virtual_servers are not in it (each service reads its
// own file).
type VirtualRecord struct {
	VirtualServers []config.VirtualServer `json:"virtual_servers"`
}

// virtualWriteAttempts bounds the compare-and-set retries of one
// UpdateVirtual when other writers keep winning.
const virtualWriteAttempts = 8

// ReadVirtual is the record and its KV revision (0 when the key was never
// written).
func ReadVirtual(ctx context.Context, kv jetstream.KeyValue) (VirtualRecord, uint64, error) {
	e, err := kv.Get(ctx, bus.KVKeyVirtualServers)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return VirtualRecord{}, 0, nil
	}
	if err != nil {
		return VirtualRecord{}, 0, fmt.Errorf("read virtual servers from kv: %w", err)
	}
	var rec VirtualRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return VirtualRecord{}, 0, fmt.Errorf("decode virtual servers record: %w", err)
	}
	return rec, e.Revision(), nil
}

// UpdateVirtual applies edit to the current record and writes the result
// with compare-and-set on the revision it read, reading again when
// another writer came first. edit may be called more than once and must
// not keep its argument; an error from it ends the update unwritten. It
// returns the revision written.
func UpdateVirtual(ctx context.Context, kv jetstream.KeyValue, edit func(VirtualRecord) (VirtualRecord, error)) (uint64, error) {
	for range virtualWriteAttempts {
		cur, rev, err := ReadVirtual(ctx, kv)
		if err != nil {
			return 0, err
		}
		next, err := edit(cur)
		if err != nil {
			return 0, err
		}
		if next.VirtualServers == nil {
			next.VirtualServers = []config.VirtualServer{}
		}
		data, err := json.Marshal(next)
		if err != nil {
			return 0, fmt.Errorf("encode virtual servers record: %w", err)
		}
		var wrote uint64
		if rev == 0 {
			wrote, err = kv.Create(ctx, bus.KVKeyVirtualServers, data)
		} else {
			wrote, err = kv.Update(ctx, bus.KVKeyVirtualServers, data, rev)
		}
		if err == nil {
			return wrote, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, fmt.Errorf("write virtual servers to kv: %w", err)
		}
	}
	return 0, fmt.Errorf("write virtual servers to kv: %d other writers came first; retry", virtualWriteAttempts)
}
