package deploy_test

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The custom resources the chart makes, as Go types with the fields of
// their CRDs (KEDA 2.x keda.sh/v1alpha1 ScaledObject, cert-manager
// cert-manager.io/v1 Certificate; the fields mcpbus may use, with their
// JSON names and types). strictDecode refuses a field not listed here, so a
// misspelt or misplaced field fails as it would against the CRD's schema.

type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              scaledObjectSpec `json:"spec"`
}

type scaledObjectSpec struct {
	ScaleTargetRef struct {
		APIVersion             string `json:"apiVersion,omitempty"`
		Kind                   string `json:"kind,omitempty"`
		Name                   string `json:"name"`
		EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
	} `json:"scaleTargetRef"`
	PollingInterval  *int32 `json:"pollingInterval,omitempty"`
	InitialCooldown  *int32 `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod   *int32 `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount *int32 `json:"idleReplicaCount,omitempty"`
	MinReplicaCount  *int32 `json:"minReplicaCount,omitempty"`
	MaxReplicaCount  *int32 `json:"maxReplicaCount,omitempty"`
	Fallback         *struct {
		FailureThreshold int32 `json:"failureThreshold"`
		Replicas         int32 `json:"replicas"`
	} `json:"fallback,omitempty"`
	Advanced *struct {
		RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
		HorizontalPodAutoscalerConfig *struct {
			Name     string                                         `json:"name,omitempty"`
			Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
		} `json:"horizontalPodAutoscalerConfig,omitempty"`
	} `json:"advanced,omitempty"`
	Triggers []scaleTrigger `json:"triggers"`
}

type scaleTrigger struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
	AuthenticationRef *struct {
		Name string `json:"name"`
		Kind string `json:"kind,omitempty"`
	} `json:"authenticationRef,omitempty"`
}

// prometheusTriggerKeys are the metadata keys of KEDA's prometheus scaler.
var prometheusTriggerKeys = []string{"serverAddress", "query", "threshold", "activationThreshold", "namespace",
	"customHeaders", "ignoreNullValues", "queryParameters", "unsafeSsl", "timeout"}

type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName  string           `json:"secretName"`
		CommonName  string           `json:"commonName,omitempty"`
		DNSNames    []string         `json:"dnsNames,omitempty"`
		IPAddresses []string         `json:"ipAddresses,omitempty"`
		Duration    *metav1.Duration `json:"duration,omitempty"`
		RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`
		IsCA        bool             `json:"isCA,omitempty"`
		Usages      []string         `json:"usages,omitempty"`
		IssuerRef   struct {
			Name  string `json:"name"`
			Kind  string `json:"kind,omitempty"`
			Group string `json:"group,omitempty"`
		} `json:"issuerRef"`
		PrivateKey *struct {
			Algorithm      string `json:"algorithm,omitempty"`
			Size           int    `json:"size,omitempty"`
			Encoding       string `json:"encoding,omitempty"`
			RotationPolicy string `json:"rotationPolicy,omitempty"`
		} `json:"privateKey,omitempty"`
	} `json:"spec"`
}
