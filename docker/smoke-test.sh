#!/usr/bin/env bash
# Offline end-to-end check of the Impulse container image with podman, as root:
#   1. containers.conf fit for this kind of machine  2. debian:bookworm-slim bootstrapped locally
#   3. image build  4. container start + ping + /metrics  5. demo client  6. SIGTERM stop, exit code 0.
# Needs: podman, runc, mmdebstrap (IMPULSE_SETUP_DOCKER=1 bash scripts/setup) and a host build of
# impulse-client (build/bin/, or IMPULSE_CLIENT=path). Never pulls: no registry is reachable.
#
# Environment (all optional):
#   IMPULSE_CLIENT       host impulse-client binary      (default: build/bin/impulse-client)
#   IMPULSE_IMAGE        tag for the built image         (default: localhost/impulse-server:latest)
#   IMPULSE_SMOKE_PORT   host UDP port to publish on     (default: a free port in 20000..29999)
#   IMPULSE_APT_SOURCES  sources.list file for the base  (default: Debian bookworm entries of /etc/apt)
#   IMPULSE_REBUILD_BASE=1  re-create debian:bookworm-slim even if it exists
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly repo_root
readonly base_image=debian:bookworm-slim
readonly image=${IMPULSE_IMAGE:-localhost/impulse-server:latest}
readonly client=${IMPULSE_CLIENT:-$repo_root/build/bin/impulse-client}
container=impulse-smoke-$$-$(date +%s)   # unique per run, removed at exit
readonly container
readonly containers_conf=/etc/containers/containers.conf
readonly demo_seconds=3

# Upper bounds [s] so that CI never hangs: every wait below is bounded.
readonly timeout_bootstrap=900
readonly timeout_build=1800
readonly timeout_ready=60
readonly timeout_demo=60

workdir=$(mktemp -d -t impulse-smoke.XXXXXX)
current_step="start-up"
step_names=()
step_seconds=()
step_started_ns=0
script_started_ns=$(date +%s%N)

log() { printf '[smoke] %s\n' "$*"; }
die() { printf '[smoke] ERROR: %s\n' "$*" >&2; exit 1; }

# Seconds elapsed since a `date +%s%N` stamp, with one decimal.
elapsed_since() {
  local now
  now=$(date +%s%N)
  awk -v a="$1" -v b="$now" 'BEGIN { printf "%.1f", (b - a) / 1e9 }'
}

begin_step() {
  current_step=$1
  step_started_ns=$(date +%s%N)
  printf '\n[smoke] ==== step %s ====\n' "$current_step"
}

end_step() {
  local took
  took=$(elapsed_since "$step_started_ns")
  step_names+=("$current_step")
  step_seconds+=("$took")
  log "step done in ${took} s"
}

print_timings() {
  local i
  printf '\n[smoke] timings:\n'
  for i in "${!step_names[@]}"; do
    printf '[smoke]   %7s s  %s\n' "${step_seconds[$i]}" "${step_names[$i]}"
  done
  printf '[smoke]   %7s s  total\n' "$(elapsed_since "$script_started_ns")"
}

container_exists() { podman container exists "$container" 2>/dev/null; }

cleanup() {
  local status=$?
  set +e
  if [[ $status -ne 0 ]]; then
    step_names+=("$current_step (failed)")
    step_seconds+=("$(elapsed_since "$step_started_ns")")
    printf '\n[smoke] FAILED during step "%s" (exit %d)\n' "$current_step" "$status" >&2
    if container_exists; then
      printf '[smoke] container log (last 50 lines):\n' >&2
      podman logs --tail 50 "$container" >&2
    fi
  fi
  if container_exists; then
    podman rm -f -t 0 "$container" >/dev/null 2>&1 || podman rm -f "$container" >/dev/null 2>&1
  fi
  rm -rf "$workdir"
  print_timings
  [[ $status -eq 0 ]] && printf '[smoke] PASSED\n'
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- helpers --------------------------------------------------------------------------------

# Sets `key = value` inside `[section]` of a TOML file, replacing the key's old value (including a
# multi-line array) or adding the key/section. Comments and other keys are left alone.
set_toml_key() {
  local file=$1 section=$2 key=$3 value=$4
  awk -v section="[$section]" -v key="$key" -v value="$value" '
    function flush_missing() { if (in_section && !done) { print key " = " value; done = 1 } }
    BEGIN { in_section = 0; done = 0; skipping = 0 }
    {
      line = $0
      if (skipping) { if (line ~ /\]/) skipping = 0; next }
      trimmed = line; sub(/^[ \t]+/, "", trimmed); sub(/[ \t]+$/, "", trimmed)
      if (trimmed ~ /^\[/) {
        flush_missing()
        in_section = (trimmed == section)
        print line; next
      }
      if (in_section && !done && trimmed ~ ("^" key "[ \t]*=")) {
        print key " = " value; done = 1
        rest = trimmed; sub(/^[^=]*=[ \t]*/, "", rest)
        if (rest ~ /^\[/ && rest !~ /\]/) skipping = 1   # multi-line array: drop its other lines
        next
      }
      print line
    }
    END {
      flush_missing()
      if (!done) { if (NR > 0) print ""; print section; print key " = " value }
    }' "$file"
}

# Prints the value of `key` in `[section]` (single-line values only), or nothing.
get_toml_key() {
  local file=$1 section=$2 key=$3
  awk -v section="[$section]" -v key="$key" '
    { trimmed = $0; sub(/^[ \t]+/, "", trimmed); sub(/[ \t]+$/, "", trimmed) }
    trimmed ~ /^\[/ { in_section = (trimmed == section); next }
    in_section && trimmed ~ ("^" key "[ \t]*=") { sub(/^[^=]*=[ \t]*/, "", trimmed); print trimmed; exit }
  ' "$file"
}

# min(wanted, hard limit of this shell) for `ulimit -H<flag>`.
capped_limit() {
  local wanted=$1 flag=$2 hard
  hard=$(ulimit -H"$flag")
  if [[ $hard == unlimited || $hard -ge $wanted ]]; then echo "$wanted"; else echo "$hard"; fi
}

# Writes the Debian bookworm entries of the host's apt sources (one-line and deb822 formats) as a
# one-line sources.list: the machine's own mirror is the only network a CI box can reach.
# Third-party repositories are left out (they would be unreachable offline), and so is Signed-By:
# mmdebstrap finds the right Debian keyring itself.
write_bookworm_sources() {
  local out=$1 files=()
  [[ -f /etc/apt/sources.list ]] && files+=(/etc/apt/sources.list)
  shopt -s nullglob
  files+=(/etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources)
  shopt -u nullglob
  [[ ${#files[@]} -gt 0 ]] || return 0
  awk '
    function wanted(suite) { return suite ~ /^bookworm(-[a-z]+)?$/ }
    function emit_stanza(   nu, nsu, u, s, uris, suites) {
      if (types ~ /(^|[ \t])deb([ \t]|$)/ && enabled !~ /^[Nn]o/ && uri_list != "") {
        nu = split(uri_list, uris, /[ \t]+/); nsu = split(suite_list, suites, /[ \t]+/)
        for (u = 1; u <= nu; u++) for (s = 1; s <= nsu; s++)
          if (wanted(suites[s])) print "deb " uris[u] " " suites[s] " " components
      }
      types = uri_list = suite_list = components = enabled = ""
    }
    FNR == 1 { if (deb822) emit_stanza(); deb822 = (FILENAME ~ /\.sources$/) }
    deb822 {
      if ($0 ~ /^[ \t]*$/) { emit_stanza(); next }
      if ($0 ~ /^#/ || $0 ~ /^[ \t]/) next          # comments, continuation lines (keys)
      field = tolower($0); sub(/:.*/, "", field)
      value = $0; sub(/^[^:]*:[ \t]*/, "", value); sub(/[ \t]+$/, "", value)
      if (field == "types") types = value
      else if (field == "uris") uri_list = value
      else if (field == "suites") suite_list = value
      else if (field == "components") components = value
      else if (field == "enabled") enabled = value
      next
    }
    {
      sub(/#.*/, "")
      if ($1 != "deb") next
      i = 2
      if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }   # drop [options]
      if (i + 1 <= NF && wanted($(i + 1))) {
        line = "deb " $i " " $(i + 1)
        for (j = i + 2; j <= NF; j++) line = line " " $j
        print line
      }
    }
    END { if (deb822) emit_stanza() }
  ' "${files[@]}" | awk '!seen[$0]++' > "$out"
}

# Picks a UDP port in 20000..29999 that nothing on the host listens on (reads /proc, so it needs
# no ss/netstat).
# A TCP port in 20000..29999 no listening socket uses (/proc/net/tcp*, column 2), for the admin port.
pick_free_tcp_port() {
  local used=() hex port attempt
  while read -r hex; do used+=("$((16#$hex))"); done < <(
    awk 'FNR > 1 { n = split($2, a, ":"); print a[n] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null || true)
  for ((attempt = 0; attempt < 200; attempt++)); do
    port=$((20000 + RANDOM % 10000))
    if [[ " ${used[*]} " != *" $port "* ]]; then echo "$port"; return 0; fi
  done
  return 1
}

pick_free_udp_port() {
  local used=() hex port attempt
  # Column 2 is LOCAL_ADDRESS:PORT with the port in hex (mawk has no strtonum: convert in bash).
  while read -r hex; do used+=("$((16#$hex))"); done < <(
    awk 'FNR > 1 { n = split($2, a, ":"); print a[n] }' /proc/net/udp /proc/net/udp6 2>/dev/null || true)
  for ((attempt = 0; attempt < 200; attempt++)); do
    port=$((20000 + RANDOM % 10000))
    if [[ " ${used[*]} " != *" $port "* ]]; then echo "$port"; return 0; fi
  done
  return 1
}

# Runs podman, dropping one known-harmless message from its stderr. Trap: podman without systemd
# logs "unable to get systemd connection to add healthchecks" (and to remove them) for every
# container whose image has a HEALTHCHECK, because it tries to schedule the check as a systemd
# timer; even --health-interval=disable does not silence it in podman 4.3. The check itself works
# (step 4 runs it with `podman healthcheck run`).
podman_quiet() {
  local status=0
  podman "$@" 2>"$workdir/podman.err" || status=$?
  grep -v 'unable to get systemd connection' "$workdir/podman.err" >&2 || true
  return "$status"
}

# ---- 0. preflight ---------------------------------------------------------------------------
begin_step "0 preflight"
[[ $(id -u) -eq 0 ]] || die "run as root: the test edits $containers_conf and uses rootful podman"
for tool in podman runc mmdebstrap timeout awk; do
  command -v "$tool" >/dev/null || die "$tool not found: run IMPULSE_SETUP_DOCKER=1 bash scripts/setup"
done
[[ -x $client ]] || die "no host client at $client: build it first (make build) or set IMPULSE_CLIENT"
log "podman $(podman --version | awk '{ print $3 }'), client $client, image $image"
end_step

# ---- 1. containers.conf ---------------------------------------------------------------------
begin_step "1 containers.conf"
# Traps on this kind of machine (VM without systemd, hybrid cgroup v1 layout, nofile hard limit
# below podman's default of 1048576):
#  - runc fails "error setting rlimit type 7: operation not permitted" unless the container's
#    ulimits are at or below the hard limits of the calling process;
#  - crun refuses the hybrid cgroup layout, runc accepts it;
#  - there is no systemd to be the cgroup manager or to take journald events.
nofile=$(capped_limit "$(cat /proc/sys/fs/nr_open 2>/dev/null || echo 1048576)" n)
nproc=$(capped_limit 4096 u)
# section|key|value, applied in this order.
wanted_conf=(
  "containers|default_ulimits|[\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]"
  'engine|runtime|"runc"'
  'engine|cgroup_manager|"cgroupfs"'
  'engine|events_logger|"file"'
)
mkdir -p "$(dirname "$containers_conf")"
[[ -f $containers_conf ]] || { log "creating $containers_conf"; : > "$containers_conf"; }
cp "$containers_conf" "$workdir/containers.conf"
for entry in "${wanted_conf[@]}"; do
  IFS='|' read -r section key value <<<"$entry"
  if [[ $(get_toml_key "$workdir/containers.conf" "$section" "$key") != "$value" ]]; then
    set_toml_key "$workdir/containers.conf" "$section" "$key" "$value" > "$workdir/containers.conf.new"
    mv "$workdir/containers.conf.new" "$workdir/containers.conf"
    log "set [$section] $key = $value"
  fi
done
if cmp -s "$workdir/containers.conf" "$containers_conf"; then
  log "$containers_conf already has what this machine needs"
else
  if [[ -s $containers_conf && ! -e $containers_conf.impulse-backup ]]; then
    cp "$containers_conf" "$containers_conf.impulse-backup"
    log "previous version saved as $containers_conf.impulse-backup"
  fi
  cp "$workdir/containers.conf" "$containers_conf"
  log "updated $containers_conf"
fi
end_step

# ---- 2. base image --------------------------------------------------------------------------
begin_step "2 base image $base_image"
if [[ ${IMPULSE_REBUILD_BASE:-0} != 1 ]] && podman image exists "$base_image"; then
  log "$base_image exists locally: reusing it"
else
  sources=$workdir/bookworm.list
  if [[ -n ${IMPULSE_APT_SOURCES:-} ]]; then
    cp "$IMPULSE_APT_SOURCES" "$sources"
  else
    write_bookworm_sources "$sources"
  fi
  [[ -s $sources ]] ||
    die "no Debian bookworm entry in /etc/apt sources: set IMPULSE_APT_SOURCES to a sources.list file"
  log "apt sources for the base image:"
  sed 's/^/[smoke]   /' "$sources"
  # Carry over the host's apt settings that make its mirror usable. Trap: CI mirrors serve a
  # snapshot whose Release files are past Valid-Until, and mmdebstrap does not read the host's
  # apt.conf.d. These options also stay in the image (/etc/apt/apt.conf.d/99mmdebstrap), so apt
  # inside `podman build` works against the same mirror.
  aptopts=()
  while IFS= read -r opt; do
    aptopts+=("--aptopt=$opt")
    log "apt option: $opt"
  done < <(apt-config dump | grep -E '^Acquire::(Check-Valid-Until|Check-Date|https?::Proxy) ' || true)
  # minbase + the debootstrap-style merged-/usr hook: without it bookworm pulls in the usrmerge
  # package and with it perl (+50 MB). The dpkg path excludes are those of the official slim
  # images and persist in the image for later apt installs.
  log "mmdebstrap --variant=minbase bookworm (downloads from the mirror above; log: mmdebstrap.log)"
  if ! timeout "$timeout_bootstrap" mmdebstrap --variant=minbase \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    "${aptopts[@]}" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    bookworm "$workdir/rootfs.tar" "$sources" >"$workdir/mmdebstrap.log" 2>&1; then
    tail -n 40 "$workdir/mmdebstrap.log" | sed 's/^/[mmdebstrap] /' >&2
    die "mmdebstrap failed (last 40 lines above)"
  fi
  grep -E '^I: success' "$workdir/mmdebstrap.log" | sed 's/^/[smoke] mmdebstrap: /' || true
  # Import from a file, not a pipe: a failed bootstrap must not leave a truncated image behind.
  podman import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --change 'LABEL org.opencontainers.image.description="Debian bookworm minbase, bootstrapped locally with mmdebstrap by docker/smoke-test.sh"' \
    "$workdir/rootfs.tar" "$base_image" >"$workdir/import.log" 2>&1 ||
    { cat "$workdir/import.log" >&2; die "podman import failed"; }
  rm -f "$workdir/rootfs.tar"
  log "imported $base_image ($(podman image inspect --format '{{.Size}}' "$base_image") bytes)"
fi
end_step

# ---- 3. image build -------------------------------------------------------------------------
begin_step "3 podman build $image"
# --format docker: the OCI image format has no HEALTHCHECK, podman would drop it with a warning.
# --network host: apt inside the build reaches the mirror exactly as the host does (no NAT, no
# CNI dependency). --pull=never: FROM must resolve to the local base image, never a registry.
# The full log goes to a file; the console gets one line per Dockerfile step, stamped with the
# seconds since the build started (so the log shows where the time goes).
show_build_steps() {
  local line started=$SECONDS
  local pattern='^(\[[0-9]+/[0-9]+\] )?(STEP [0-9]+/[0-9]+:|COMMIT)|^--> Using cache'
  while IFS= read -r line; do
    [[ $line =~ $pattern ]] && printf '[%4d s] %s\n' "$((SECONDS - started))" "${line:0:100}"
  done
  return 0
}
if ! timeout "$timeout_build" podman build --format docker --pull=never --network host \
    -f "$repo_root/docker/Dockerfile" -t "$image" "$repo_root" 2>&1 |
    tee "$workdir/build.log" | show_build_steps; then
  tail -n 60 "$workdir/build.log" | sed 's/^/[build] /' >&2
  die "podman build failed (last 60 lines above)"
fi
# What the image must provide (a health check, a non-root user, 7777/udp exposed), read back from
# its config.
healthcheck=$(podman image inspect --format '{{json .Config.Healthcheck}}' "$image")
[[ $healthcheck == *impulse-client* ]] || die "image has no HEALTHCHECK (was it built with --format docker?)"
user=$(podman image inspect --format '{{.Config.User}}' "$image")
[[ -n $user && ${user%%:*} != root && ${user%%:*} != 0 ]] || die "image runs as root (USER '$user')"
ports=$(podman image inspect --format '{{json .Config.ExposedPorts}}' "$image")
[[ $ports == *7777/udp* ]] || die "image does not expose 7777/udp: $ports"
log "image: user $user, exposes $ports, size $(podman image inspect --format '{{.Size}}' "$image") bytes"
# compose's viewer service runs impulse-viewer from this image: it must start (its libraries load)
# and find the three.js file it serves.
podman_quiet run --rm --pull=never --entrypoint impulse-viewer "$image" --help >/dev/null || die "impulse-viewer does not run in the image"
podman_quiet run --rm --pull=never --entrypoint /bin/sh "$image" -c 'test -s /usr/share/javascript/three/build/three.min.js' ||
  die "the image lacks /usr/share/javascript/three/build/three.min.js (impulse-viewer's page needs it)"
end_step

# ---- 4. start + readiness -------------------------------------------------------------------
begin_step "4 start container"
port=${IMPULSE_SMOKE_PORT:-$(pick_free_udp_port)} || die "no free UDP port found in 20000..29999"
admin_port=$(pick_free_tcp_port) || die "no free TCP port found in 20000..29999"
# Published on the bridge network to a free host port: the image runs unchanged (its CMD and its
# health check both use 7777 inside) and a server already on the host's 7777 cannot interfere.
# Same hardening as docker/compose.yaml: read-only root, no capabilities, no privilege gain.
podman_quiet run -d --pull=never --name "$container" \
  --read-only --cap-drop=ALL --security-opt=no-new-privileges \
  -p "127.0.0.1:$port:7777/udp" -p "127.0.0.1:$admin_port:9100/tcp" "$image" >/dev/null
log "container $container publishes 127.0.0.1:$port/udp -> 7777/udp, 127.0.0.1:$admin_port/tcp -> 9100/tcp (admin)"
deadline=$((SECONDS + timeout_ready))
attempts=0
until timeout 10 "$client" ping --server "127.0.0.1:$port" --timeout-ms 1000 >"$workdir/ping.log" 2>&1; do
  attempts=$((attempts + 1))
  state=$(podman inspect --format '{{.State.Status}}' "$container")
  [[ $state == running ]] || die "container is $state before answering a ping"
  if ((SECONDS >= deadline)); then
    cat "$workdir/ping.log" >&2
    die "no ping answer within ${timeout_ready} s ($attempts attempts)"
  fi
  sleep 0.5
done
log "ping answered after $attempts failed attempt(s): $(tr '\n' ' ' <"$workdir/ping.log")"
# Podman without systemd has no timer to run health checks; run the image's own check once.
podman_quiet healthcheck run "$container" >"$workdir/health.log" ||
  { cat "$workdir/health.log" >&2; die "the image's HEALTHCHECK failed"; }
log "image HEALTHCHECK: $(podman inspect --format '{{.State.Health.Status}}' "$container")"
# The image's CMD serves the admin endpoint on 9100 (all of the container's interfaces): /metrics
# must answer in the Prometheus text format with a tick counter, and /readyz with 200.
fetch() { python3 -c 'import sys, urllib.request; r = urllib.request.urlopen(sys.argv[1], timeout=5); sys.stdout.write(r.read().decode())' "$1"; }
deadline=$((SECONDS + timeout_ready))
until fetch "http://127.0.0.1:$admin_port/metrics" >"$workdir/metrics.txt" 2>"$workdir/metrics.err" &&
      grep -qE '^impulse_ticks_total [0-9]' "$workdir/metrics.txt"; do
  if ((SECONDS >= deadline)); then
    cat "$workdir/metrics.err" "$workdir/metrics.txt" >&2
    die "the container's /metrics did not answer with impulse_ticks_total within ${timeout_ready} s"
  fi
  sleep 0.5
done
fetch "http://127.0.0.1:$admin_port/readyz" >/dev/null || die "the container's /readyz did not answer 200"
log "admin endpoint: $(grep -E '^impulse_ticks_total ' "$workdir/metrics.txt"), /readyz 200"
end_step

# ---- 5. demo client -------------------------------------------------------------------------
begin_step "5 demo client"
if ! timeout "$timeout_demo" "$client" demo --server "127.0.0.1:$port" --seconds "$demo_seconds" \
    >"$workdir/demo.log" 2>&1; then
  sed 's/^/[demo] /' "$workdir/demo.log" >&2
  die "impulse-client demo failed"
fi
sed 's/^/[demo] /' "$workdir/demo.log" | tail -n 15
# The demo's closing line, "disconnected: sent ... received ..., N snapshots", counts the
# snapshots it decoded; zero means the stream never flowed.
snapshots=$(grep -E '^disconnected:' "$workdir/demo.log" | grep -oE '[0-9]+ snapshots' | grep -oE '^[0-9]+' ||
            true)
[[ -n $snapshots ]] || die "the demo output has no 'disconnected: ... N snapshots' summary line"
((snapshots > 0)) || die "the demo received no snapshots"
log "demo received $snapshots snapshots"
end_step

# ---- 6. SIGTERM stop ------------------------------------------------------------------------
begin_step "6 stop (SIGTERM)"
stop_started_ns=$(date +%s%N)
podman_quiet stop -t 10 "$container" >/dev/null
exit_code=$(podman inspect --format '{{.State.ExitCode}}' "$container")
log "stopped in $(elapsed_since "$stop_started_ns") s, exit code $exit_code"
podman logs --tail 5 "$container" 2>&1 | sed 's/^/[server] /'
# 137 would mean podman had to SIGKILL it after the 10 s grace period.
[[ $exit_code == 0 ]] || die "the server exited with $exit_code on SIGTERM, expected 0"
podman_quiet rm "$container" >/dev/null
end_step
