{{/*
Written by hand: the values' checks and the SSH test. The objects'
templates beside this file are generated from deploy/ (deploy/chart.go).
*/}}

{{/*
fluxd.validate fails the install with every problem of the values at once,
as 'fluxctl install' does (deploy.Options.Validate).
*/}}
{{- define "fluxd.validate" -}}
{{- $errs := list -}}
{{- $dns := `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` -}}
{{- if not .Values.image -}}
{{- $errs = append $errs (printf "image is required: the fluxd image to run, e.g. --set image=registry.example.com/fluxd:v1.2.3. No fluxd image is published: 'make image IMAGE=registry.example.com/fluxd:TAG' builds and pushes one. To upgrade a running install, give the image it runs: kubectl -n %s get deployment fluxd -o jsonpath='{.spec.template.spec.containers[0].image}'" .Release.Namespace) -}}
{{- end -}}
{{- $url := toString (.Values.git.url | default "") -}}
{{- if not $url -}}
{{- $errs = append $errs "git.url is required: the remote fluxd releases through, e.g. --set git.url=ssh://git@github.com/org/manifests.git (an HTTPS URL may carry a token: https://USER:TOKEN@git.example.com/org/manifests.git)" -}}
{{- else if contains "\n" $url -}}
{{- $errs = append $errs "git.url holds a line break" -}}
{{- end -}}
{{- if not (and (regexMatch $dns .Release.Namespace) (le (len .Release.Namespace) 63)) -}}
{{- $errs = append $errs (printf "%q is not a namespace name (lower-case letters, digits and '-', at most 63)" .Release.Namespace) -}}
{{- end -}}
{{- range $k := list "watchNamespaces" "extraArgs" "tolerations" -}}
{{- if not (or (kindIs "slice" (index $.Values $k)) (kindIs "invalid" (index $.Values $k))) -}}
{{- $errs = append $errs (printf "%s must be a list, e.g. --set '%s={a,b}' or a YAML list in a values file; it is %v" $k $k (index $.Values $k)) -}}
{{- end -}}
{{- end -}}
{{- if not (or (kindIs "slice" .Values.git.paths) (kindIs "invalid" .Values.git.paths)) -}}
{{- $errs = append $errs (printf "git.paths must be a list, e.g. --set 'git.paths={clusters/a,apps}'; it is %v" .Values.git.paths) -}}
{{- end -}}
{{- if kindIs "slice" .Values.watchNamespaces -}}
{{- range .Values.watchNamespaces -}}
{{- if not (and (regexMatch $dns (toString .)) (le (len (toString .)) 63)) -}}
{{- $errs = append $errs (printf "watchNamespaces: %q is not a namespace name (lower-case letters, digits and '-', at most 63)" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if lt (int .Values.replicas) 1 -}}
{{- $errs = append $errs (printf "replicas must be at least 1, not %v" .Values.replicas) -}}
{{- end -}}
{{- $db := toString (.Values.historyDBSecret | default "") -}}
{{- if and (gt (int .Values.replicas) 1) (not $db) -}}
{{- $errs = append $errs "replicas above 1 need historyDBSecret: NAME: the replicas must share a PostgreSQL database (a Secret with keys \"url\", postgres://USER@HOST:PORT/DB?sslmode=..., and \"password\") for a new leader to carry on with the old one's jobs; each replica's own SQLite would lose them" -}}
{{- end -}}
{{- if and $db (or (gt (len $db) 253) (not (regexMatch `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$` $db))) -}}
{{- $errs = append $errs (printf "historyDBSecret %q is not a Secret name" $db) -}}
{{- end -}}
{{- $cr := toString (.Values.clusterRoleName | default "") -}}
{{- if and $cr (or (gt (len $cr) 253) (not (regexMatch `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$` $cr))) -}}
{{- $errs = append $errs (printf "clusterRoleName %q is not a ClusterRole name (lower-case letters, digits, '-' and '.')" $cr) -}}
{{- end -}}
{{- if $errs -}}
{{- fail (printf "fluxd's chart values:\n  - %s" (join "\n  - " $errs)) -}}
{{- end -}}
{{- end -}}

{{/*
fluxd.gitSSH is "true" when fluxd reaches git.url over SSH, as fluxd and
'fluxctl install' read it (internal/giturl.IsSSH, go-git's rules): an
ssh:// URL, or scp-like HOST:PATH with no '/' before the ':'.
*/}}
{{- define "fluxd.gitSSH" -}}
{{- $u := toString (.Values.git.url | default "") -}}
{{- if regexMatch `^[^:]+://` $u -}}
{{- regexMatch `^(?i)ssh://` $u -}}
{{- else if regexMatch `^(?:(?P<user>[^@]+)@)?(?P<host>[^:\s]+):(?:(?P<port>[0-9]{1,5}):)?(?P<path>[^\\].*)$` $u -}}
{{- not (contains "/" (index (splitList ":" $u) 0)) -}}
{{- else -}}
false
{{- end -}}
{{- end -}}
