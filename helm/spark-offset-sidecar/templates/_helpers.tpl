{{/*
The name of every object: fullnameOverride, else the release's name when it holds the
chart's (helm install spark-offset-sidecar ... gives spark-offset-sidecar), else
<release>-spark-offset-sidecar.
*/}}
{{- define "sidecar.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "sidecar.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "sidecar.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: offset-committer
app.kubernetes.io/part-of: spark-offset-sidecar
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "sidecar.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sidecar.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sidecar.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sidecar.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* The Secret holding tokens.json: the user's, or the chart's own. */}}
{{- define "sidecar.tokensSecret" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecret -}}
{{- else if not .Values.auth.allowUnauthenticated -}}
{{- printf "%s-tokens" (include "sidecar.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "sidecar.saslSecret" -}}
{{- default (printf "%s-kafka" (include "sidecar.fullname" .)) .Values.kafka.sasl.existingSecret -}}
{{- end -}}

{{- define "sidecar.sasl" -}}
{{- if hasPrefix "SASL" .Values.kafka.securityProtocol }}true{{ end -}}
{{- end -}}

{{/* SASL with a secret in a file: a password, or an OAuth client secret (not MSK IAM). */}}
{{- define "sidecar.saslSecretNeeded" -}}
{{- if and (include "sidecar.sasl" .) (ne .Values.kafka.sasl.mechanism "AWS_MSK_IAM") }}true{{ end -}}
{{- end -}}

{{/* The jobs' token issuer: the one given, or this cluster's with inCluster. */}}
{{- define "sidecar.oidcIssuer" -}}
{{- .Values.auth.oidc.issuer | default (ternary "https://kubernetes.default.svc.cluster.local" "" .Values.auth.oidc.inCluster) -}}
{{- end -}}

{{/* A map as key=value,key=value (sorted): SASL extensions. */}}
{{- define "sidecar.pairs" -}}
{{- $pairs := list -}}
{{- range $key, $value := . }}{{ $pairs = append $pairs (printf "%s=%s" $key $value) }}{{ end -}}
{{- join "," $pairs -}}
{{- end -}}

{{- define "sidecar.tls" -}}
{{- if hasSuffix "SSL" .Values.kafka.securityProtocol }}true{{ end -}}
{{- end -}}

{{/* Checks that JSON schema cannot express. */}}
{{- define "sidecar.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (ne .Values.database.type "postgresql") -}}
{{- fail "replicaCount > 1 needs database.type=postgresql: replicas share one database (SQLite is one pod's file)" -}}
{{- end -}}
{{- if and (eq .Values.database.type "postgresql") (not .Values.database.postgresql.existingSecret) -}}
{{- fail "database.type=postgresql needs database.postgresql.existingSecret (a Secret with the URL)" -}}
{{- end -}}
{{- $mechanism := .Values.kafka.sasl.mechanism -}}
{{- if and (include "sidecar.sasl" .) (not (has $mechanism (list "OAUTHBEARER" "AWS_MSK_IAM"))) (not .Values.kafka.sasl.username) -}}
{{- fail "kafka.securityProtocol SASL_* needs kafka.sasl.username" -}}
{{- end -}}
{{- if and (include "sidecar.saslSecretNeeded" .) (not .Values.kafka.sasl.existingSecret) (not .Values.kafka.sasl.password) -}}
{{- fail (printf "kafka.sasl.mechanism %s needs kafka.sasl.password or kafka.sasl.existingSecret (for OAUTHBEARER: the client secret)" $mechanism) -}}
{{- end -}}
{{- if and (include "sidecar.sasl" .) (eq $mechanism "OAUTHBEARER") (not (and .Values.kafka.sasl.oauth.tokenUrl .Values.kafka.sasl.oauth.clientId)) -}}
{{- fail "kafka.sasl.mechanism OAUTHBEARER needs kafka.sasl.oauth.tokenUrl and kafka.sasl.oauth.clientId" -}}
{{- end -}}
{{- if and .Values.auth.identities (not (include "sidecar.oidcIssuer" .)) -}}
{{- fail "auth.identities need auth.oidc.issuer (or auth.oidc.inCluster: true)" -}}
{{- end -}}
{{- end -}}

{{/*
An alert's runbook annotation. With metrics.prometheusRule.runbookBaseUrl (where the manual's
site is published: `make docs` builds it), runbook_url is that page's URL,
<base>/operate/runbooks/<alert>/; without, no runbook_url (a path is not a link) but
runbook, naming the manual's page.
*/}}
{{- define "sidecar.runbook" -}}
{{- $root := index . 0 -}}
{{- $alert := index . 1 -}}
{{- with $root.Values.metrics.prometheusRule.runbookBaseUrl -}}
runbook_url: {{ printf "%s/operate/runbooks/%s/" (trimSuffix "/" .) $alert | quote }}
{{- else -}}
runbook: {{ printf "the manual's page operate/runbooks/%s (docs/operate/runbooks/%s.md)" $alert $alert | quote }}
{{- end -}}
{{- end -}}
