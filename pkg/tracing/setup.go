package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Options are observability.tracing (config.TracingSettings) as Setup
// reads them; the OTEL_* variables win over each.
type Options struct {
	Enabled     bool
	Endpoint    string // collector base URL; "" is the exporter's default
	Protocol    string // "http/protobuf" (default) or "grpc"
	SampleRatio float64
	// Service is service.name (OTEL_SERVICE_NAME wins).
	Service string
	// Version is service.version.
	Version string
	// Log receives the SDK's errors (a collector that cannot be reached);
	// nil leaves OpenTelemetry's default (standard error).
	Log *slog.Logger
}

// Standard variables Setup reads itself (the exporter and SDK read the
// others: headers, timeouts, OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES).
const (
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envTracesExporter = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envSampler        = "OTEL_TRACES_SAMPLER"
)

// On reports whether o with the environment turns tracing on:
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off,
// OTEL_TRACES_EXPORTER=otlp on, else o.Enabled decides.
func (o Options) On() bool {
	if strings.EqualFold(os.Getenv(envSDKDisabled), "true") {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(os.Getenv(envTracesExporter))) {
	case "none":
		return false
	case "otlp":
		return true
	}
	return o.Enabled
}

// protocol is the OTLP protocol after the environment.
func (o Options) protocol() string {
	return cmp.Or(os.Getenv(envTracesProtocol), os.Getenv(envProtocol), o.Protocol, "http/protobuf")
}

// Shutdown flushes and stops a provider Setup installed.
type Shutdown func(context.Context) error

// Setup installs the process's tracer provider and the W3C trace-context
// propagator when o (with the environment) turns tracing on, and returns
// the function that flushes the spans still buffered and stops it. Off, it
// installs nothing and returns a Shutdown that does nothing. Call it once
// per process, before the services start.
func Setup(ctx context.Context, o Options) (Shutdown, error) {
	if !o.On() {
		return func(context.Context) error { return nil }, nil
	}
	exp, err := newExporter(ctx, o)
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cmp.Or(o.Service, "mcpbus"))}
	if o.Version != "" {
		attrs = append(attrs, attribute.String("service.version", o.Version))
	}
	// Later detectors win: OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
	// replace the defaults.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(exp), sdktrace.WithResource(res)}
	if os.Getenv(envSampler) == "" {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))))
	}
	if o.Log != nil {
		log := o.Log
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: cannot export spans", "error", err)
		}))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	current.Store(tp.Tracer(Scope))
	// W3C trace context only: no baggage, so nothing a caller puts in a
	// baggage header travels through mcpbus to the bus or to upstreams.
	otel.SetTextMapPropagator(propagation.TraceContext{})
	active.Store(true)
	return func(ctx context.Context) error {
		active.Store(false)
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
		}
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("tracing: flush spans: %w", err)
		}
		return nil
	}, nil
}

// newExporter is the OTLP exporter of o's protocol. The exporters read
// OTEL_EXPORTER_OTLP_* themselves; o.Endpoint is passed only when neither
// endpoint variable is set.
func newExporter(ctx context.Context, o Options) (*otlptrace.Exporter, error) {
	useConfig := o.Endpoint != "" && os.Getenv(envEndpoint) == "" && os.Getenv(envTracesEndpoint) == ""
	switch p := o.protocol(); p {
	case "grpc":
		var opts []otlptracegrpc.Option
		if useConfig {
			opts = append(opts, otlptracegrpc.WithEndpointURL(o.Endpoint))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp grpc exporter: %w", err)
		}
		return exp, nil
	case "http/protobuf":
		var opts []otlptracehttp.Option
		if useConfig {
			u, err := url.Parse(o.Endpoint)
			if err != nil {
				return nil, errors.New("tracing: observability.tracing.endpoint is not a URL")
			}
			u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("tracing: otlp http exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("tracing: OTLP protocol %q is not supported (http/protobuf or grpc)", p)
	}
}
