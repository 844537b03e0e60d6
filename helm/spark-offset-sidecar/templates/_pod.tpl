{{/* Shared by the migrate init container and the server. */}}
{{- define "sidecar.containerEnv" -}}
{{ include "sidecar.envFrom" . }}
{{- if eq .Values.database.type "postgresql" }}
env:
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
{{- range $index, $mount := .Values.extraSecretMounts }}
- {name: extra-secret-{{ $index }}, mountPath: {{ $mount.mountPath | quote }}, readOnly: true}
{{- end }}
{{- end -}}

{{/* The pod's volumes (tmp, the SQLite claim, the Secrets mounted above, extraSecretMounts). */}}
{{- define "sidecar.volumes" -}}
{{- $fullname := include "sidecar.fullname" . -}}
- name: tmp
  emptyDir: {}
{{- if eq .Values.database.type "sqlite" }}
- name: data
  persistentVolumeClaim:
    claimName: {{ .Values.database.sqlite.existingClaim | default $fullname }}
{{- end }}
{{- with include "sidecar.tokensSecret" . }}
- name: tokens
  secret:
    secretName: {{ . }}
    items: [{key: tokens.json, path: tokens.json}]
{{- end }}
{{- if .Values.auth.oidc.inCluster }}
# The API server's keys are read with the pod's own token (a service account may
# read /openid/v1/jwks: system:service-account-issuer-discovery) and its CA.
- name: kube-api
  projected:
    sources:
      - serviceAccountToken: {path: token, expirationSeconds: 3600}
      - configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}
{{- end }}
{{- if include "sidecar.saslSecretNeeded" . }}
- name: kafka-password
  secret:
    secretName: {{ include "sidecar.saslSecret" . }}
    items: [{key: password, path: password}]
{{- end }}
{{- if and (include "sidecar.tls" .) .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.existingSecret }}
{{- end }}
{{- range $index, $mount := .Values.extraSecretMounts }}
- name: extra-secret-{{ $index }}
  secret:
    secretName: {{ $mount.secretName }}
{{- end }}
{{- end -}}
