package audit

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpbus/mcpbus/pkg/bus"
	"github.com/mcpbus/mcpbus/pkg/config"
	"github.com/mcpbus/mcpbus/pkg/observability"
	"github.com/mcpbus/mcpbus/pkg/observability/metrics"
)

// EnsureStream creates or updates the audit stream of the deployment n with
// the retention of s (audit.max_age_hours, max_records, max_bytes), kept by
// replicas servers (0 is auto, see bus.StreamReplicas). Safe to call from every replica at once.
func EnsureStream(ctx context.Context, js jetstream.JetStream, n bus.Names, s config.AuditSettings, replicas int) error {
	d := config.DefaultAudit()
	if s.MaxAgeHours <= 0 {
		s.MaxAgeHours = d.MaxAgeHours
	}
	if s.MaxRecords <= 0 {
		s.MaxRecords = d.MaxRecords
	}
	if s.MaxBytes <= 0 {
		s.MaxBytes = -1 // no size bound
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: n.AuditStream(), Subjects: []string{n.AuditAll()},
		Description: "mcpbus audit log: tool calls and config changes",
		Storage:     jetstream.FileStorage, Replicas: bus.StreamReplicas(js, replicas),
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
		MaxAge: time.Duration(s.MaxAgeHours) * time.Hour, MaxMsgs: s.MaxRecords, MaxBytes: s.MaxBytes,
	})
	if err != nil {
		return fmt.Errorf("create stream %s: %w", n.AuditStream(), err)
	}
	return nil
}

// Writer publishes records to the audit stream without making the caller
// wait for JetStream: Write returns at once and the record is published in
// the background until JetStream acknowledges it, retrying through a
// leader election or a reconnect (each record carries a message id, so a
// retry of a record that was stored after all is dropped as a duplicate).
// At most MaxPending records wait at a time; beyond that a record is
// dropped, logged and counted. Close waits for the outstanding ones. A nil
// *Writer writes nothing (audit disabled).
type Writer struct {
	js      jetstream.JetStream
	names   bus.Names
	log     *slog.Logger
	metrics *metrics.Audit
	// Settings are the audit block (CaptureArguments, MaxArgumentBytes).
	Settings config.AuditSettings
	// TraceID returns the trace id of ctx's span ("" without one).
	// Defaults to the OpenTelemetry span context in ctx (empty while
	// tracing is off).
	TraceID func(context.Context) string

	wg sync.WaitGroup
	// pending holds one token per record not yet acknowledged.
	pending chan struct{}
	// stop ends the retries (Close past its deadline).
	stop     chan struct{}
	stopOnce sync.Once
	// db is the table writer (audit.database), nil without one.
	db *dbWriter
}

// MaxPending is how many records a Writer keeps retrying at most.
const MaxPending = 10000

// Publish retry: each attempt waits at most publishTimeout for the
// acknowledgement; the pause between attempts doubles up to retryMax.
const (
	publishTimeout = 5 * time.Second
	retryMin       = 50 * time.Millisecond
	retryMax       = 2 * time.Second
)

// WriterOptions configure NewWriter.
type WriterOptions struct {
	Settings config.AuditSettings
	Replicas int
	Log      *slog.Logger
	Metrics  *metrics.Audit
	// DB, when set (audit.database), also receives every record, written
	// in the background in batches; rows older than Settings.MaxAgeHours
	// are deleted at start and every PruneEvery.
	DB Table
	// PruneEvery is the interval between prunes of DB. Defaults to an hour.
	PruneEvery time.Duration
}

// NewWriter makes sure the stream exists and returns a writer on nc; with
// audit disabled it returns nil (a Writer that writes nothing).
func NewWriter(ctx context.Context, nc *nats.Conn, n bus.Names, o WriterOptions) (*Writer, error) {
	if !o.Settings.Enabled {
		return nil, nil
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("audit: jetstream: %w", err)
	}
	if err := EnsureStream(ctx, js, n, o.Settings, o.Replicas); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if o.Log == nil {
		o.Log = observability.Discard()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.NewAudit(nil)
	}
	if o.Settings.MaxArgumentBytes <= 0 {
		o.Settings.MaxArgumentBytes = config.DefaultAudit().MaxArgumentBytes
	}
	w := &Writer{js: js, names: n, log: o.Log, metrics: o.Metrics, Settings: o.Settings, TraceID: spanTraceID,
		pending: make(chan struct{}, MaxPending), stop: make(chan struct{})}
	if o.DB != nil {
		w.db = startDBWriter(w, o.DB, o.PruneEvery)
	}
	return w, nil
}

// spanTraceID is the W3C trace id of ctx's OpenTelemetry span, "" without
// a valid one.
func spanTraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// Enabled reports whether w writes records.
func (w *Writer) Enabled() bool { return w != nil }

// CaptureArguments reports whether call records keep masked arguments.
func (w *Writer) CaptureArguments() bool { return w != nil && w.Settings.CaptureArguments }

// Write publishes r, filling in its time, request id and trace id from ctx
// when unset.
func (w *Writer) Write(ctx context.Context, r Record) {
	if w == nil {
		return
	}
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	if r.RequestID == "" {
		r.RequestID = bus.RequestID(ctx)
	}
	if r.TraceID == "" && w.TraceID != nil {
		r.TraceID = w.TraceID(ctx)
	}
	w.db.enqueue(r)
	var subject string
	if r.Kind == KindCall {
		subject = w.names.AuditCall(r.User, r.Tool)
	} else {
		subject = w.names.AuditConfig(r.User)
	}
	kind := r.Kind // the goroutine below keeps the kind, not the record
	enc := encoders.Get().(*encoder)
	body, err := enc.encode(&r)
	if err != nil {
		enc.put()
		w.fail(kind, err)
		return
	}
	id, err := msgID()
	if err != nil {
		enc.put()
		w.fail(kind, err)
		return
	}
	select {
	case w.pending <- struct{}{}:
	default:
		enc.put()
		w.fail(kind, fmt.Errorf("%d records wait for JetStream already", MaxPending))
		return
	}
	msg := enc.message(subject, body, id)
	// Sent here, in the order of Write, so that one writer's records keep
	// their order in the stream (audit tail shows the stream's order); only
	// the acknowledgement is awaited apart. A record whose first send fails
	// or goes unacknowledged is sent again (deduplicated by its id).
	fut, err := w.js.PublishMsgAsync(msg)
	w.wg.Go(func() {
		defer func() { <-w.pending }()
		if err == nil && w.acked(fut) {
			// Acknowledged: the body is no longer read (a record sent
			// again keeps its buffer: an unacknowledged send may still be
			// retried by the client).
			enc.put()
			w.metrics.Records.WithLabelValues(kind).Inc()
			return
		}
		w.publish(msg, kind)
	})
}

// encoder is a record's encoding buffer and message, reused once its
// record is acknowledged (no buffer, message or header per record).
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
	msg nats.Msg
	hdr nats.Header
	ids [1]string
}

// message is e's message of body (e's buffer) to subject with the
// deduplication id, all fields but these reset.
func (e *encoder) message(subject string, body []byte, id string) *nats.Msg {
	if e.hdr == nil {
		e.hdr = nats.Header{}
	}
	clear(e.hdr)
	e.ids[0] = id
	e.hdr[jetstream.MsgIDHeader] = e.ids[:]
	e.msg = nats.Msg{Subject: subject, Data: body, Header: e.hdr}
	return &e.msg
}

// maxPooledEncoder is the largest buffer kept for reuse (a record with
// large arguments does not pin its buffer).
const maxPooledEncoder = 64 << 10

var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf) // HTML escaped, as json.Marshal
	return e
}}

// encode is json.Marshal(r) into e's buffer (valid until e.put).
func (e *encoder) encode(r *Record) ([]byte, error) {
	e.buf.Reset()
	if err := e.enc.Encode(r); err != nil {
		return nil, fmt.Errorf("audit record: %w", err)
	}
	b := e.buf.Bytes()
	return b[:len(b)-1], nil // without Encode's newline
}

func (e *encoder) put() {
	if e.buf.Cap() <= maxPooledEncoder {
		encoders.Put(e)
	}
}

// acked waits for fut's acknowledgement, at most publishTimeout (or until
// Close gives up), and reports whether it came.
func (w *Writer) acked(fut jetstream.PubAckFuture) bool {
	t := time.NewTimer(publishTimeout)
	defer t.Stop()
	select {
	case <-fut.Ok():
		return true
	case <-fut.Err():
	case <-t.C:
	case <-w.stop:
	}
	return false
}

// publish sends msg until JetStream acknowledges it or Close gives up.
func (w *Writer) publish(msg *nats.Msg, kind string) {
	pause := retryMin
	for {
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		_, err := w.js.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			w.metrics.Records.WithLabelValues(kind).Inc()
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-w.stop:
			t.Stop()
			w.fail(kind, fmt.Errorf("unacknowledged at close: %w", err))
			return
		case <-t.C:
		}
		pause = min(2*pause, retryMax)
	}
}

// msgID is a random JetStream message id (deduplicates a retried publish).
func msgID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("audit message id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func (w *Writer) fail(kind string, err error) {
	w.metrics.Failures.WithLabelValues(kind).Inc()
	w.log.Warn("audit record not written", "kind", kind, observability.Err(err))
}

// Close waits for the acknowledgements of every record written so far, and
// for the database writes of the queued ones (at most until ctx ends).
func (w *Writer) Close(ctx context.Context) error {
	if w == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { w.wg.Wait(); w.db.close(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		w.stopOnce.Do(func() { close(w.stop) }) // the retries give up
		return fmt.Errorf("audit: %d records still unacknowledged at close", len(w.pending))
	}
}
