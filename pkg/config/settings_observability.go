package config

import (
	"net/url"
	"strings"
)

// ObservabilitySettings is config.yaml's observability section.
type ObservabilitySettings struct {
	Tracing TracingSettings `yaml:"tracing"`
}

// OTLP protocols of observability.tracing.protocol (the values of
// OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	TracingProtocolHTTP = "http/protobuf"
	TracingProtocolGRPC = "grpc"
)

// TracingSettings turn on OpenTelemetry tracing, exported over OTLP. The
// standard OTEL_* variables take precedence over each key:
// OTEL_TRACES_EXPORTER=otlp turns tracing on and =none (or
// OTEL_SDK_DISABLED=true) off; OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT,
// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL, OTEL_TRACES_SAMPLER[_ARG] and
// OTEL_SERVICE_NAME replace endpoint, protocol, sample_ratio and the service
// name. Headers for the collector (an API key) are secrets and come only
// from OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, never from this file.
type TracingSettings struct {
	// Enabled turns tracing on. Off (the default) installs nothing: every
	// span is a no-op and no trace context is sent anywhere.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the collector's base URL ("http://otel-collector:4318";
	// /v1/traces is appended for http/protobuf, as for
	// OTEL_EXPORTER_OTLP_ENDPOINT). Default "": the exporter's own default
	// (http://localhost:4318, or :4317 for grpc).
	Endpoint string `yaml:"endpoint"`
	// Protocol is http/protobuf (the default) or grpc.
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of new traces recorded (0 to 1; a request
	// arriving with a sampled traceparent follows its parent). Default 1.
	SampleRatio float64 `yaml:"sample_ratio"`
	// ServiceNamePrefix prefixes the service name each process reports
	// (service.name = prefix + "api", "toolcall", …; `mcpbus dev` reports
	// prefix + "dev"). Default "mcpbus-".
	ServiceNamePrefix string `yaml:"service_name_prefix"`
}

func (v *settingsValidator) tracing(t *TracingSettings) {
	switch t.Protocol {
	case TracingProtocolHTTP, TracingProtocolGRPC:
	default:
		v.errorf("observability.tracing.protocol", "must be %s or %s, got %q", TracingProtocolHTTP, TracingProtocolGRPC, t.Protocol)
	}
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		v.errorf("observability.tracing.sample_ratio", "must be between 0 and 1, got %v", t.SampleRatio)
	}
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			v.errorf("observability.tracing.endpoint", "must be an http:// or https:// URL such as http://otel-collector:4318")
		case u.User != nil || u.RawQuery != "":
			// Credentials for the collector belong in
			// OTEL_EXPORTER_OTLP_HEADERS, not in a file or a log line.
			v.errorf("observability.tracing.endpoint", "must not carry userinfo or a query: put collector credentials in OTEL_EXPORTER_OTLP_HEADERS")
		}
	}
	if strings.TrimSpace(t.ServiceNamePrefix) != t.ServiceNamePrefix {
		v.errorf("observability.tracing.service_name_prefix", "must not start or end with spaces")
	}
}
