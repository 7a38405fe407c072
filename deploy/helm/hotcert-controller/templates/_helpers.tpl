{{/* The release's full name, at most 63 characters. */}}
{{- define "hotcert-controller.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "hotcert-controller.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hotcert-controller.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "hotcert-controller.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hotcert-controller.labels" -}}
{{ include "hotcert-controller.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: hotcert
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The webhook's serving Secret. */}}
{{- define "hotcert-controller.webhookSecretName" -}}
{{- if .Values.webhook.certManager.enabled -}}
{{- default (printf "%s-webhook-tls" (include "hotcert-controller.fullname" .)) .Values.webhook.secretName -}}
{{- else -}}
{{- required "webhook.secretName is required when webhook.certManager.enabled is false" .Values.webhook.secretName -}}
{{- end -}}
{{- end -}}

{{/* The Secret of the census's Prometheus credentials, when the census is on. */}}
{{- define "hotcert-controller.censusSecret" -}}
{{- if .Values.census.enabled -}}
{{- .Values.census.prometheus.secretName -}}
{{- end -}}
{{- end -}}
