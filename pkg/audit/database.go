package audit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpbus/mcpbus/pkg/observability"
)

// Table is the database table audit.database writes to (mcp_audit; package
// audittable adapts a store.AuditStore). Package audit does not import the
// store, so services without a database do not link it.
type Table interface {
	// InsertRecords stores the records in one transaction.
	InsertRecords(ctx context.Context, recs []Record) error
	// Prune deletes the records older than before and returns how many.
	Prune(ctx context.Context, before time.Time) (int, error)
}

const (
	// dbQueue bounds the records waiting for the database; beyond it a
	// record is dropped (counted as a failure) rather than delaying a call.
	dbQueue = 4096
	// dbBatch is the most records one transaction inserts.
	dbBatch = 256
	// dbTimeout bounds one batch insert or prune.
	dbTimeout = 10 * time.Second
)

// dbWriter writes records to the mcp_audit table from one goroutine, in
// batches, and prunes the rows older than audit.max_age_hours. A nil
// *dbWriter does nothing.
type dbWriter struct {
	w          *Writer
	db         Table
	q          chan Record
	closing    chan struct{}
	done       chan struct{}
	closeOnce  sync.Once
	closed     atomic.Bool
	pruneEvery time.Duration
}

func startDBWriter(w *Writer, db Table, pruneEvery time.Duration) *dbWriter {
	if pruneEvery <= 0 {
		pruneEvery = time.Hour
	}
	d := &dbWriter{w: w, db: db, q: make(chan Record, dbQueue), closing: make(chan struct{}), done: make(chan struct{}),
		pruneEvery: pruneEvery}
	go d.run()
	return d
}

// enqueue hands r to the writer goroutine without waiting.
func (d *dbWriter) enqueue(r Record) {
	if d == nil {
		return
	}
	if d.closed.Load() {
		d.w.fail(r.Kind, errors.New("database: writer closed"))
		return
	}
	select {
	case d.q <- r:
	default:
		d.w.fail(r.Kind, errors.New("database: queue full"))
	}
}

// close stops the goroutine once it has written what is queued.
func (d *dbWriter) close() {
	if d == nil {
		return
	}
	d.closeOnce.Do(func() {
		d.closed.Store(true)
		close(d.closing)
	})
	<-d.done
}

func (d *dbWriter) run() {
	defer close(d.done)
	d.prune()
	tick := time.NewTicker(d.pruneEvery)
	defer tick.Stop()
	for {
		select {
		case r := <-d.q:
			d.insert(r)
		case <-tick.C:
			d.prune()
		case <-d.closing:
			for {
				select {
				case r := <-d.q:
					d.insert(r)
				default:
					return
				}
			}
		}
	}
}

// insert writes first and whatever else is queued (up to dbBatch) in one
// transaction; a failure is logged and counted per record.
func (d *dbWriter) insert(first Record) {
	batch := []Record{first}
	for len(batch) < dbBatch {
		select {
		case r := <-d.q:
			batch = append(batch, r)
			continue
		default:
		}
		break
	}
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	if err := d.db.InsertRecords(ctx, batch); err != nil {
		for _, r := range batch {
			d.w.fail(r.Kind, err)
		}
	}
}

// prune deletes the rows older than audit.max_age_hours. Every replica
// prunes; the delete is idempotent.
func (d *dbWriter) prune() {
	hours := d.w.Settings.MaxAgeHours
	if hours <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	cutoff := time.Now().Add(-time.Duration(hours) * time.Hour)
	n, err := d.db.Prune(ctx, cutoff)
	switch {
	case err != nil:
		d.w.log.Warn("audit records not pruned", observability.Err(err))
	case n > 0:
		d.w.log.Info("audit records pruned", "table", "mcp_audit", "deleted", n)
	}
}
