{{/* Shared by the migrate init container and the server. */}}
{{- define "sidecar.containerEnv" -}}
{{ include "sidecar.envFrom" . }}
{{- if eq .Values.database.type "postgresql" }}
env:
{{- include "sidecar.databaseUrl" . }}
{{- end }}
{{- end -}}

{{/* The watcher's: the server's, on its own port. */}}
{{- define "sidecar.watcherEnv" -}}
{{ include "sidecar.envFrom" . }}
env:
  - name: SIDECAR_PORT
    value: {{ .Values.watcher.port | quote }}
{{- if eq .Values.database.type "postgresql" }}
{{- include "sidecar.databaseUrl" . }}
{{- end }}
{{- end -}}

{{- define "sidecar.envFrom" -}}
envFrom:
  - configMapRef:
      name: {{ include "sidecar.fullname" . }}
{{- with .Values.extraEnvFrom }}
{{ toYaml . | indent 2 }}
{{- end }}
{{- end -}}

{{- define "sidecar.databaseUrl" }}
  - name: SIDECAR_DATABASE_URL
    valueFrom:
      secretKeyRef:
        name: {{ .Values.database.postgresql.existingSecret }}
        key: {{ .Values.database.postgresql.urlKey }}
{{- end -}}

{{- define "sidecar.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{- define "sidecar.volumeMounts" -}}
- {name: tmp, mountPath: /tmp}
{{- if eq .Values.database.type "sqlite" }}
- {name: data, mountPath: /data}
{{- end }}
{{- if include "sidecar.tokensSecret" . }}
- {name: tokens, mountPath: /etc/sidecar/tokens, readOnly: true}
{{- end }}
{{- if include "sidecar.saslSecretNeeded" . }}
- {name: kafka-password, mountPath: /etc/sidecar/kafka, readOnly: true}
{{- end }}
{{- if .Values.auth.oidc.inCluster }}
- {name: kube-api, mountPath: /etc/sidecar/kube-api, readOnly: true}
{{- end }}
{{- if and (include "sidecar.tls" .) .Values.kafka.tls.existingSecret }}
- {name: kafka-tls, mountPath: /etc/sidecar/kafka-tls, readOnly: true}
{{- end }}
{{- end -}}
