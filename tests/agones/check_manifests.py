#!/usr/bin/env python3
"""Checks docker/agones/*.yaml without a cluster: each file parses as YAML and is the kind it
claims, and the manifests agree with each other and with impulse-server's Agones flags:
- the GameServer (and the Fleet's template, which must be the same spec) opens UDP 7777 and runs
  the server on --port=7777;
- the fleet's health period is longer than the server's Health interval (--agones-health-interval,
  default 2 s), with room for at least two calls per period;
- CPU and memory are requested and limited, requests <= limits, and --threads equals the CPU
  limit (a wider worker pool would be throttled by the kernel mid-tick);
- the FleetAutoscaler names the Fleet and uses a Buffer policy with min <= max;
- the admin endpoint runs (the args replace the image's CMD, which turns it on): --admin-port=9100
  and --admin-bind=0.0.0.0, TCP 9100 declared, a liveness probe on /healthz and a readiness probe
  on /readyz there, and the pod annotated for Prometheus on that port;
- the pod's termination grace period covers the drain (--drain-seconds, 30 s under Agones) plus
  the Shutdown call.

Usage: check_manifests.py DIR   (exit 0 when every check passes; each failure printed)
"""
import sys
from pathlib import Path

import yaml

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
    return condition


def load(directory, name, kind):
    path = Path(directory) / name
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        failures.append(f"{name}: does not parse: {e}")
        return None
    if not check(len(docs) == 1, f"{name}: expected one document, found {len(docs)}"):
        return None
    doc = docs[0]
    check(doc.get("kind") == kind, f"{name}: kind is {doc.get('kind')!r}, expected {kind!r}")
    check(bool(doc.get("apiVersion")), f"{name}: no apiVersion")
    check(bool((doc.get("metadata") or {}).get("name")), f"{name}: no metadata.name")
    return doc


def flag(args, name, default=None):
    """The value of --name=VALUE or --name VALUE in a container's args."""
    for i, a in enumerate(args):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return default


def cpu_cores(quantity):
    q = str(quantity)
    return float(q[:-1]) / 1000.0 if q.endswith("m") else float(q)


def mebibytes(quantity):
    q = str(quantity)
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    for suffix, scale in units.items():
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * scale
    return float(q) / (1024 * 1024)


def check_gameserver_spec(where, spec):
    ports = spec.get("ports") or []
    check(any(p.get("containerPort") == 7777 and p.get("protocol", "UDP") == "UDP" for p in ports),
          f"{where}: no UDP containerPort 7777 in {ports}")
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    named = [c for c in containers if c.get("name") == spec.get("container", containers[0]["name"] if containers else None)]
    if not check(len(named) == 1, f"{where}: spec.container does not name exactly one container"):
        return
    container = named[0]
    args = [str(a) for a in container.get("args") or []]
    check(flag(args, "port") == "7777", f"{where}: the server must listen on --port=7777 (args {args})")

    health = spec.get("health") or {}
    check(not health.get("disabled", False), f"{where}: health checking is disabled")
    interval = float(flag(args, "agones-health-interval", "2"))
    period = float(health.get("periodSeconds", 5))
    check(period >= 2 * interval,
          f"{where}: health.periodSeconds {period} leaves room for fewer than two Health calls every "
          f"{interval} s (--agones-health-interval)")
    check(int(health.get("failureThreshold", 3)) >= 1, f"{where}: failureThreshold < 1")

    admin_port = flag(args, "admin-port")
    check(admin_port == "9100", f"{where}: the admin endpoint is off or moved: --admin-port={admin_port} (args {args})")
    check(flag(args, "admin-bind") == "0.0.0.0",
          f"{where}: --admin-bind must be 0.0.0.0 for the kubelet and Prometheus to reach it")
    check(any(p.get("containerPort") == 9100 and p.get("protocol", "TCP") == "TCP" for p in container.get("ports") or []),
          f"{where}: the container does not declare TCP 9100")
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = (container.get(probe) or {}).get("httpGet") or {}
        check(get.get("path") == path and get.get("port") == 9100,
              f"{where}: {probe} must GET {path} on port 9100 (has {get})")
    annotations = (((spec.get("template") or {}).get("metadata") or {}).get("annotations")) or {}
    check(annotations.get("prometheus.io/scrape") == "true" and annotations.get("prometheus.io/port") == "9100",
          f"{where}: the pod template is not annotated for Prometheus on 9100 ({annotations})")

    # SIGTERM drains (--drain-seconds; -1, the default, is 30 s under Agones), then Shutdown is
    # waited for at most 5 s: the grace period must cover both, or the kubelet kills mid-drain.
    drain = float(flag(args, "drain-seconds", "-1"))
    drain = 30.0 if drain < 0 else drain
    grace = float(((spec.get("template") or {}).get("spec") or {}).get("terminationGracePeriodSeconds", 30))
    check(grace >= drain + 10, f"{where}: terminationGracePeriodSeconds {grace} does not cover the {drain} s drain "
                               f"plus the Shutdown call (give at least {drain + 10:g})")

    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    for kind in ("cpu", "memory"):
        check(kind in requests, f"{where}: no {kind} request")
        check(kind in limits, f"{where}: no {kind} limit")
    if all(k in d for d in (requests, limits) for k in ("cpu", "memory")):
        check(cpu_cores(requests["cpu"]) <= cpu_cores(limits["cpu"]), f"{where}: cpu request above its limit")
        check(mebibytes(requests["memory"]) <= mebibytes(limits["memory"]), f"{where}: memory request above its limit")
        threads = flag(args, "threads")
        check(threads is not None and threads != "0" and float(threads) == cpu_cores(limits["cpu"]),
              f"{where}: --threads ({threads}) must equal the CPU limit ({limits['cpu']})")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    directory = sys.argv[1]
    gameserver = load(directory, "gameserver.yaml", "GameServer")
    fleet = load(directory, "fleet.yaml", "Fleet")
    autoscaler = load(directory, "fleetautoscaler.yaml", "FleetAutoscaler")

    if gameserver:
        check_gameserver_spec("gameserver.yaml", gameserver.get("spec") or {})
    if fleet:
        template_spec = ((fleet.get("spec") or {}).get("template") or {}).get("spec") or {}
        check_gameserver_spec("fleet.yaml template", template_spec)
        if gameserver:
            check(template_spec == gameserver.get("spec"),
                  "fleet.yaml's template spec differs from gameserver.yaml's spec: keep them the same")
    if autoscaler and fleet:
        spec = autoscaler.get("spec") or {}
        check(spec.get("fleetName") == fleet["metadata"]["name"],
              f"fleetautoscaler.yaml: fleetName {spec.get('fleetName')!r} is not the Fleet {fleet['metadata']['name']!r}")
        policy = spec.get("policy") or {}
        check(policy.get("type") == "Buffer", "fleetautoscaler.yaml: policy.type is not Buffer")
        buffer = policy.get("buffer") or {}
        check(int(buffer.get("bufferSize", 0)) >= 1, "fleetautoscaler.yaml: bufferSize < 1")
        check(int(buffer.get("minReplicas", 0)) <= int(buffer.get("maxReplicas", 0)),
              "fleetautoscaler.yaml: minReplicas above maxReplicas (or maxReplicas missing)")

    for f in failures:
        print(f"FAIL {f}")
    if not failures:
        print("docker/agones: 3 manifests parse and agree (UDP 7777, health period, resources, fleet name, "
              "admin port 9100 with probes)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
