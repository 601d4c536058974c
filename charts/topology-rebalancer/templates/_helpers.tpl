{{- define "tr.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "tr.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- include "tr.name" . -}}
{{- end -}}
{{- end -}}

{{- define "tr.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tr.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "tr.labels" -}}
{{ include "tr.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: topology-rebalancer
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "tr.migrate" -}}
{{- if eq .Values.mode "migrate" -}}true{{- end -}}
{{- end -}}

{{- define "tr.issued" -}}
{{- if and (eq .Values.mode "migrate") (eq .Values.webhook.certificates "cert-manager") -}}true{{- end -}}
{{- end -}}

{{- define "tr.validate" -}}
{{- if not (has .Values.mode (list "dry-run" "evict" "migrate")) -}}
{{- fail (printf "mode: expected dry-run, evict or migrate, got %v" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.webhook.certificates (list "self-signed" "cert-manager")) -}}
{{- fail (printf "webhook.certificates: expected self-signed or cert-manager, got %v" .Values.webhook.certificates) -}}
{{- end -}}
{{- end -}}
