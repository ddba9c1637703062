{{/* Chart name, overridable. */}}
{{- define "kube-ipvs-proxy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: release + chart, unless the release name already holds the chart name. */}}
{{- define "kube-ipvs-proxy.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "kube-ipvs-proxy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kube-ipvs-proxy.selectorLabels" . }}
app.kubernetes.io/version: {{ include "kube-ipvs-proxy.imageTag" . | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Labels that select the pods (immutable once installed). */}}
{{- define "kube-ipvs-proxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-ipvs-proxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kube-ipvs-proxy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kube-ipvs-proxy.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "kube-ipvs-proxy.imageTag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{- define "kube-ipvs-proxy.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "kube-ipvs-proxy.imageTag" .) -}}
{{- end -}}

{{/* "IP:port", with brackets around an IPv6 address. Takes (list host port). */}}
{{- define "kube-ipvs-proxy.hostPort" -}}
{{- $host := index . 0 -}}
{{- $port := index . 1 -}}
{{- if contains ":" $host -}}
{{- printf "[%s]:%d" $host (int $port) -}}
{{- else -}}
{{- printf "%s:%d" $host (int $port) -}}
{{- end -}}
{{- end -}}

{{/* True (non-empty) for a loopback address: 127.0.0.0/8, ::1, localhost. */}}
{{- define "kube-ipvs-proxy.isLoopback" -}}
{{- if or (hasPrefix "127." .) (eq . "::1") (eq . "localhost") -}}true{{- end -}}
{{- end -}}

{{/* The metrics bind host: as set, else 0.0.0.0 with the ServiceMonitor (Prometheus scrapes the node IP), else 127.0.0.1. */}}
{{- define "kube-ipvs-proxy.metricsHost" -}}
{{- $host := .Values.metrics.bindAddress | default (ternary "0.0.0.0" "127.0.0.1" .Values.serviceMonitor.enabled) -}}
{{- if and .Values.serviceMonitor.enabled (include "kube-ipvs-proxy.isLoopback" $host) -}}
{{- fail (printf "serviceMonitor.enabled: Prometheus cannot scrape metrics bound to %s; set metrics.bindAddress to 0.0.0.0 (or ::), or leave it empty" $host) -}}
{{- end -}}
{{- $host -}}
{{- end -}}

{{/* The KubeProxyConfiguration, as the daemon reads it with --config (checked by its parser in the chart tests). Block
     YAML throughout (lists too): the daemon reads it without loading js-yaml. */}}
{{- define "kube-ipvs-proxy.config" -}}
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: {{ .Values.mode | toJson }}
healthzBindAddress: {{ include "kube-ipvs-proxy.hostPort" (list .Values.healthz.bindAddress .Values.healthz.port) | quote }}
metricsBindAddress: {{ include "kube-ipvs-proxy.hostPort" (list (include "kube-ipvs-proxy.metricsHost" .) .Values.metrics.port) | quote }}
clusterCIDR: {{ .Values.clusterCIDR | toJson }}
nodePortAddresses:
{{- range (.Values.nodePortAddresses | default list) }}
- {{ . | toJson }}
{{- else }} []
{{- end }}
ipvs:
  scheduler: {{ .Values.ipvs.scheduler | toJson }}
  syncPeriod: {{ .Values.syncPeriod | toJson }}
  minSyncPeriod: {{ .Values.minSyncPeriod | toJson }}
  strictARP: {{ .Values.ipvs.strictARP | toJson }}
  excludeCIDRs:
{{- range (.Values.ipvs.excludeCIDRs | default list) }}
  - {{ . | toJson }}
{{- else }} []
{{- end }}
  tcpTimeout: {{ .Values.ipvs.tcpTimeout | toJson }}
  tcpFinTimeout: {{ .Values.ipvs.tcpFinTimeout | toJson }}
  udpTimeout: {{ .Values.ipvs.udpTimeout | toJson }}
iptables:
  masqueradeAll: {{ .Values.masqueradeAll | toJson }}
  masqueradeBit: {{ .Values.masqueradeBit | int | toJson }}
  syncPeriod: {{ .Values.syncPeriod | toJson }}
  minSyncPeriod: {{ .Values.minSyncPeriod | toJson }}
logging:
  format: {{ .Values.logging.format | toJson }}
  verbosity: {{ .Values.logging.verbosity | int | toJson }}
{{- end -}}
