{{/*
The release's name prefix: the release name when it contains "mcpbus",
else <release>-mcpbus. Objects are <prefix>-<component>.
*/}}
{{- define "mcpbus.fullname" -}}
{{- if contains "mcpbus" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-mcpbus" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The services, in dependency order. */}}
{{- define "mcpbus.services" -}}
tokens discovery toolcall taskpoller api
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "mcpbus.commonLabels" -}}
app.kubernetes.io/part-of: mcpbus
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* A component's selector labels: (dict "ctx" $ "component" "api"). */}}
{{- define "mcpbus.selector" -}}
app.kubernetes.io/name: {{ include "mcpbus.fullname" .ctx }}-{{ .component }}
{{- end -}}

{{/* A component's labels: (dict "ctx" $ "component" "api"). */}}
{{- define "mcpbus.labels" -}}
{{ include "mcpbus.selector" . }}
app.kubernetes.io/component: {{ .component }}
{{ include "mcpbus.commonLabels" .ctx }}
{{- end -}}

{{/* An image reference: repository:tag[@digest]; (dict "image" .Values.image "default" tag). */}}
{{- define "mcpbus.image" -}}
{{- $tag := .image.tag | default .default | toString -}}
{{- if or (eq $tag "latest") (eq $tag "") -}}
{{- fail (printf "image %s: set a version tag (not %q)" .image.repository $tag) -}}
{{- end -}}
{{- if .image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .image.digest) -}}
{{- fail (printf "image %s: digest must be sha256:<64 hex digits>" .image.repository) -}}
{{- end -}}
{{- printf "%s:%s@%s" .image.repository $tag .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The Secret of a service (or "migrate"): (dict "ctx" $ "service" "api"). */}}
{{- define "mcpbus.secretName" -}}
{{- include "mcpbus.fullname" .ctx }}-{{ .service }}
{{- end -}}

{{/* What a service reads from its Secret, as a list of keys. */}}
{{- define "mcpbus.secretKeys" -}}
{{- $keys := dict
  "api" (list "nats-password" "database-url" "credentials-key" "admin-key-sha256")
  "discovery" (list "nats-password" "database-url")
  "toolcall" (list "nats-password" "database-url")
  "taskpoller" (list "nats-password" "database-url")
  "tokens" (list "nats-password" "database-url" "credentials-key")
  "migrate" (list "database-url") -}}
{{- index $keys . | join " " -}}
{{- end -}}

{{/* The NATS client URL without credentials. */}}
{{- define "mcpbus.natsHostURL" -}}
{{- if .Values.nats.enabled -}}
{{- printf "%s://%s-nats:4222" (ternary "tls" "nats" .Values.tls.enabled) (include "mcpbus.fullname" .) -}}
{{- else -}}
{{- required "nats.externalURL is required when nats.enabled is false" .Values.nats.externalURL -}}
{{- end -}}
{{- end -}}

{{/*
A service's env: its Secret's keys as the variables mcpbus reads. The NATS
password goes in MCPBUS_NATS_<SERVICE>_PASSWORD, the variable nats-server
reads for the same user: with it set the service connects as
mcpbus-<service> (the URL carries no user). (dict "ctx" $ "service" "api")
*/}}
{{- define "mcpbus.serviceEnv" -}}
{{- $ctx := .ctx -}}
{{- $secret := include "mcpbus.secretName" . -}}
{{- $keys := splitList " " (include "mcpbus.secretKeys" .service) -}}
- { name: MCPBUS_CONFIG, value: /etc/mcpbus/{{ ternary "config.yaml" "services.yaml" (eq .service "api") }} }
- { name: MCPBUS_EXTENSIONS_CONFIG, value: /etc/mcpbus/extensions_config.json }
{{- if has "nats-password" $keys }}
- { name: MCPBUS_NATS_URL, value: {{ include "mcpbus.natsHostURL" $ctx | quote }} }
- name: {{ printf "MCPBUS_NATS_%s_PASSWORD" (upper .service) }}
  valueFrom: { secretKeyRef: { name: {{ $secret }}, key: nats-password } }
{{- end }}
{{- if has "database-url" $keys }}
- name: MCPBUS_DATABASE_URL
  valueFrom: { secretKeyRef: { name: {{ $secret }}, key: database-url } }
{{- end }}
{{- if has "credentials-key" $keys }}
- name: MCPBUS_CREDENTIALS_KEY
  valueFrom: { secretKeyRef: { name: {{ $secret }}, key: credentials-key } }
{{- end }}
{{- if has "admin-key-sha256" $keys }}
- name: MCPBUS_ADMIN_KEY_SHA256
  valueFrom: { secretKeyRef: { name: {{ $secret }}, key: admin-key-sha256 } }
{{- end }}
{{- end -}}

{{/* The pod securityContext of the mcpbus image (uid 10001). */}}
{{- define "mcpbus.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .uid }}
runAsGroup: {{ .uid }}
fsGroup: {{ .uid }}
seccompProfile: { type: RuntimeDefault }
{{- end -}}

{{- define "mcpbus.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: { drop: ["ALL"] }
{{- end -}}

{{/*
Placement of a component's pods: anti-affinity on the node (hard or soft)
and the topology spread constraints. (dict "ctx" $ "component" "api" "mode" "soft")
*/}}
{{- define "mcpbus.placement" -}}
{{- $sel := include "mcpbus.selector" . | fromYaml -}}
affinity:
  podAntiAffinity:
    {{- if eq .mode "hard" }}
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels: {{ toJson $sel }}
    {{- else if eq .mode "soft" }}
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels: {{ toJson $sel }}
    {{- else }}
    {{- fail (printf "antiAffinity %q: want hard or soft" .mode) }}
    {{- end }}
{{- with .ctx.Values.placement.topologySpread }}
topologySpreadConstraints:
  {{- range . }}
  - topologyKey: {{ .topologyKey }}
    maxSkew: {{ .maxSkew | default 1 }}
    whenUnsatisfiable: {{ .whenUnsatisfiable | default "ScheduleAnyway" }}
    labelSelector:
      matchLabels: {{ toJson $sel }}
  {{- end }}
{{- end }}
{{- with .ctx.Values.placement.nodeSelector }}
nodeSelector: {{ toJson . }}
{{- end }}
{{- with .ctx.Values.placement.tolerations }}
tolerations: {{ toJson . }}
{{- end }}
{{- end -}}

{{/* A PodDisruptionBudget for a component: (dict "ctx" $ "component" "api"). */}}
{{- define "mcpbus.pdb" -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "mcpbus.fullname" .ctx }}-{{ .component }}
  labels:
    {{- include "mcpbus.labels" . | nindent 4 }}
spec:
  maxUnavailable: {{ .ctx.Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      {{- include "mcpbus.selector" . | nindent 6 }}
{{- end -}}

{{/* Whether a service's replica count belongs to an autoscaler: "true" or "". */}}
{{- define "mcpbus.autoscaled" -}}
{{- if and (has .service (list "toolcall" "taskpoller")) (has .ctx.Values.autoscaling.mode (list "keda" "cpu")) -}}
true
{{- else if not (has .ctx.Values.autoscaling.mode (list "keda" "cpu" "none")) -}}
{{- fail (printf "autoscaling.mode %q: want keda, cpu or none" .ctx.Values.autoscaling.mode) -}}
{{- end -}}
{{- end -}}

{{/* The password variables accounts.conf reads (password: $VAR; not the
$JS/$KV/$SRV subjects of its permissions), sorted and unique. */}}
{{- define "mcpbus.natsPasswordVars" -}}
{{- $vars := list -}}
{{- range regexFindAll "password:\\s*\\$[A-Z][A-Z0-9_]*" (.Files.Get "files/accounts.conf") -1 -}}
{{- $vars = append $vars (regexReplaceAll "^password:\\s*\\$" . "") -}}
{{- end -}}
{{- $vars | uniq | sortAlpha | join " " -}}
{{- end -}}

{{/* Whether the api serves HTTPS: "true" or "". */}}
{{- define "mcpbus.apiTLS" -}}
{{- if and .Values.tls.enabled .Values.tls.apiServesTLS -}}true{{- end -}}
{{- end -}}
