package audit

import (
	"context"
	"encoding/json"
	"errors"
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
// replicas servers (0 means 1). Safe to call from every replica at once.
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
		Storage:     jetstream.FileStorage, Replicas: max(replicas, 1),
		Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
		MaxAge: time.Duration(s.MaxAgeHours) * time.Hour, MaxMsgs: s.MaxRecords, MaxBytes: s.MaxBytes,
	})
	if err != nil {
		return fmt.Errorf("create stream %s: %w", n.AuditStream(), err)
	}
	return nil
}

// Writer publishes records to the audit stream without making the caller
// wait for JetStream: Write returns at once and the acknowledgement is
// awaited in the background (a failure is logged and counted). Close waits
// for the outstanding ones. A nil *Writer writes nothing (audit disabled).
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
	// db is the table writer (audit.database), nil without one.
	db *dbWriter
}

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
	w := &Writer{js: js, names: n, log: o.Log, metrics: o.Metrics, Settings: o.Settings, TraceID: spanTraceID}
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
	subject := w.names.AuditConfig(r.User)
	if r.Kind == KindCall {
		subject = w.names.AuditCall(r.User, r.Tool)
	}
	body, err := json.Marshal(r)
	if err != nil {
		w.fail(r.Kind, err)
		return
	}
	fut, err := w.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: body})
	if err != nil {
		w.fail(r.Kind, err)
		return
	}
	w.wg.Go(func() {
		select {
		case <-fut.Ok():
			w.metrics.Records.WithLabelValues(r.Kind).Inc()
		case err := <-fut.Err():
			w.fail(r.Kind, err)
		}
	})
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
		return errors.New("audit: records still unacknowledged at close")
	}
}
