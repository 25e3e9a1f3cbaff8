{{/*
The chart's name.
*/}}
{{- define "kubegate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The release's full name, used for every object.
*/}}
{{- define "kubegate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kubegate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "kubegate.labels" -}}
helm.sh/chart: {{ include "kubegate.chart" . }}
{{ include "kubegate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kubegate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubegate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kubegate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubegate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kubegate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Paths inside the container. */}}
{{- define "kubegate.dataDir" -}}/var/lib/kubegate{{- end }}
{{- define "kubegate.configFile" -}}/etc/kubegate/config.yaml{{- end }}

{{/*
The Service's in-cluster DNS names, for the generated serving certificate.
*/}}
{{- define "kubegate.serviceNames" -}}
{{- $svc := include "kubegate.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) | toJson }}
{{- end }}

{{/*
Whether etcd is reached over TLS (every endpoint https://).
*/}}
{{- define "kubegate.etcdTLS" -}}
{{- $https := 0 }}
{{- range .Values.etcd.endpoints }}{{ if hasPrefix "https://" . }}{{ $https = add1 $https }}{{ end }}{{ end }}
{{- if gt $https 0 }}true{{ end }}
{{- end }}

{{/*
Checks the combinations values.schema.json cannot express; fails with what to change.
*/}}
{{- define "kubegate.validate" -}}
{{- $v := .Values }}
{{- if eq $v.storage.type "embedded" }}
{{- if gt (int $v.replicaCount) 1 }}
{{- fail (printf "replicaCount is %d but storage.type is embedded: the embedded store is one file on one volume and serves exactly one replica. Set replicaCount: 1, or storage.type: etcd with etcd.endpoints (and tls.existingSecret and serviceAccountSigningKey.existingSecret) for several replicas." (int $v.replicaCount)) }}
{{- end }}
{{- if $v.etcd.endpoints }}
{{- fail "etcd.endpoints is set but storage.type is embedded: set storage.type: etcd to store objects in etcd." }}
{{- end }}
{{- else }}
{{- if not $v.etcd.endpoints }}
{{- fail "storage.type is etcd but etcd.endpoints is empty: give the etcd client URLs, e.g. --set etcd.endpoints={https://etcd-0.etcd:2379}." }}
{{- end }}
{{- $https := 0 }}
{{- range $v.etcd.endpoints }}{{ if hasPrefix "https://" . }}{{ $https = add1 $https }}{{ end }}{{ end }}
{{- if and (gt $https 0) (lt $https (len $v.etcd.endpoints)) }}
{{- fail "etcd.endpoints mixes http:// and https:// URLs: use one scheme for every member." }}
{{- end }}
{{- if and (gt $https 0) (not $v.etcd.existingSecret) }}
{{- fail "etcd.endpoints are https:// but etcd.existingSecret is empty: name a Secret with ca.crt (etcd's CA), tls.crt and tls.key (the client certificate)." }}
{{- end }}
{{- if and (eq $https 0) $v.etcd.existingSecret }}
{{- fail "etcd.existingSecret is set but etcd.endpoints are http://: TLS to etcd needs https:// endpoints." }}
{{- end }}
{{- if not $v.tls.existingSecret }}
{{- fail "storage.type is etcd but tls.existingSecret is empty: every replica must serve the same certificate and trust the same client CA; name a Secret with tls.crt, tls.key and the client CA bundle (tls.clientCAKey, default ca.crt)." }}
{{- end }}
{{- if not $v.serviceAccountSigningKey.existingSecret }}
{{- fail "storage.type is etcd but serviceAccountSigningKey.existingSecret is empty: every replica must sign and verify ServiceAccount tokens with the same key; name a Secret holding the PEM private key (serviceAccountSigningKey.key, default sa.key)." }}
{{- end }}
{{- end }}
{{- if and $v.podDisruptionBudget.enabled (ge (int $v.podDisruptionBudget.minAvailable) (int $v.replicaCount)) }}
{{- fail (printf "podDisruptionBudget.minAvailable is %d with replicaCount %d: no pod could ever be evicted, so node drains would hang. Set minAvailable below replicaCount (several replicas need storage.type: etcd), or leave podDisruptionBudget.enabled false." (int $v.podDisruptionBudget.minAvailable) (int $v.replicaCount)) }}
{{- end }}
{{- if and $v.tls.existingSecret $v.tls.sans }}
{{- fail "tls.sans names the generated serving certificate, but tls.existingSecret serves the Secret's certificate: put the names in that certificate and leave tls.sans empty." }}
{{- end }}
{{- if and $v.service.nodePort (eq $v.service.type "ClusterIP") }}
{{- fail "service.nodePort is set but service.type is ClusterIP: set service.type NodePort or LoadBalancer." }}
{{- end }}
{{- if and $v.frontProxy.existingSecret (not $v.frontProxy.allowedNames) }}
{{- fail "frontProxy.allowedNames is empty: kubegate would take X-Remote-User from any client certificate the front-proxy CA signed. Name the proxy certificates' common names (kubeadm's is front-proxy-client)." }}
{{- end }}
{{- range $key := list "securePort" "bindAddress" "dataDir" "tls" }}
{{- if hasKey $v.config $key }}
{{- fail (printf "config.%s is managed by the chart: use the chart's values (securePort, tls.*; the data dir is a volume) instead." $key) }}
{{- end }}
{{- end }}
{{- if and (hasKey $v.config "storage") (kindIs "map" $v.config.storage) }}
{{- if hasKey $v.config.storage "etcd" }}
{{- fail "config.storage.etcd is managed by the chart: use storage.type: etcd and etcd.* instead." }}
{{- end }}
{{- end }}
{{- end }}

{{/*
config.yaml: the user's config values with the keys the chart manages.
*/}}
{{- define "kubegate.config" -}}
{{- $cfg := deepCopy .Values.config }}
{{- $_ := set $cfg "securePort" (int .Values.securePort) }}
{{- $_ := set $cfg "bindAddress" "0.0.0.0" }}
{{- if not .Values.tls.existingSecret }}
{{- $sans := concat (include "kubegate.serviceNames" . | fromJsonArray) .Values.tls.sans | uniq }}
{{- $_ := set $cfg "tls" (dict "sans" $sans) }}
{{- end }}
{{- if eq .Values.storage.type "etcd" }}
{{- $storage := deepCopy (default dict .Values.config.storage) }}
{{- $etcd := dict "endpoints" .Values.etcd.endpoints "prefix" .Values.etcd.prefix "compactionInterval" .Values.etcd.compactionInterval }}
{{- if .Values.etcd.existingSecret }}
{{- $_ := set $etcd "caFile" "/etc/kubegate/etcd/ca.crt" }}
{{- $_ := set $etcd "certFile" "/etc/kubegate/etcd/tls.crt" }}
{{- $_ := set $etcd "keyFile" "/etc/kubegate/etcd/tls.key" }}
{{- end }}
{{- $_ := set $storage "etcd" $etcd }}
{{- $_ := set $cfg "storage" $storage }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/*
The `kubegate serve` arguments.
*/}}
{{- define "kubegate.args" -}}
- serve
- --config={{ include "kubegate.configFile" . }}
- --data-dir={{ include "kubegate.dataDir" . }}
{{- if .Values.tls.existingSecret }}
- --tls-cert-file=/etc/kubegate/tls/tls.crt
- --tls-private-key-file=/etc/kubegate/tls/tls.key
- --client-ca-file=/etc/kubegate/tls/{{ .Values.tls.clientCAKey }}
{{- end }}
{{- if .Values.serviceAccountSigningKey.existingSecret }}
- --service-account-signing-key-file=/etc/kubegate/service-account/{{ .Values.serviceAccountSigningKey.key }}
{{- end }}
{{- if .Values.frontProxy.existingSecret }}
- --proxy-client-cert-file=/etc/kubegate/front-proxy/tls.crt
- --proxy-client-key-file=/etc/kubegate/front-proxy/tls.key
- --requestheader-client-ca-file=/etc/kubegate/front-proxy/ca.crt
{{- /* Without allowed names any certificate the CA signed could assert any identity. */}}
- --requestheader-allowed-names={{ join "," .Values.frontProxy.allowedNames }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
