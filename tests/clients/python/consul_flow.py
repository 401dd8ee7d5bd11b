"""py-consul against roster's Consul face: registers one instance with an HTTP check and
one with a TCP check (the targets are servers the test runs on loopback), waits until the
health API passes both, reads them back through agent.services(), catalog.service() and
health.service(passing=True), then follows the test's commands on stdin:

    http-down   the test stopped the HTTP check's server: wait until that check is critical
                and the passing list lacks it
    persisted   (after the test restarted the node) the HTTP-checked registration is
                still in agent.services() and catalog.service()
    deregister  deregister both; they are gone from agent.services() and health.service()

    python consul_flow.py --host 127.0.0.1 --port P --token T --service S \
        --http-ip 127.x.y.z --http-url http://127.0.0.1:Q/health \
        --tcp-ip 127.x.y.w --tcp-target 127.0.0.1:R

Prints one JSON line per step: {"step": ..., "ok": true, ...}; a failure is ok false.
"""

import argparse
import json
import sys
import time

import consul


def step(name, **fields):
    print(json.dumps({"step": name, "ok": True, **fields}), flush=True)


def fail(name, reason):
    print(json.dumps({"step": name, "ok": False, "reason": reason}), flush=True)
    sys.exit(1)


def wait(name, seconds, cond):
    """Polls cond() every 200 ms until it answers None; fails the step with its last
    answer after `seconds`. Answers how long it took."""
    start = time.monotonic()
    while True:
        try:
            reason = cond()
        except Exception as e:  # a refused call is a reason like any other
            reason = repr(e)
        if reason is None:
            return time.monotonic() - start
        if time.monotonic() - start > seconds:
            fail(name, reason)
        time.sleep(0.2)


def statuses(entries, service_id):
    """The check statuses of one instance in a health.service() answer, or None."""
    for e in entries:
        if e["Service"]["ID"] == service_id:
            return {c["CheckID"]: c["Status"] for c in e["Checks"]}
    return None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--service", required=True)
    p.add_argument("--http-ip", required=True)
    p.add_argument("--http-url", required=True)
    p.add_argument("--tcp-ip", required=True)
    p.add_argument("--tcp-target", required=True)
    a = p.parse_args()
    for ip in (a.http_ip, a.tcp_ip):
        if not ip.startswith("127."):
            fail("args", "not a loopback address: " + ip)
    c = consul.Consul(host=a.host, port=a.port, token=a.token)
    http_id, tcp_id = a.service + "-http", a.service + "-tcp"
    tcp_host, tcp_port = a.tcp_target.rsplit(":", 1)

    try:
        c.agent.service.register(
            a.service,
            service_id=http_id,
            address=a.http_ip,
            port=8080,
            tags=["py", "check=http"],
            meta={"version": "2"},
            check=consul.Check.http(a.http_url, "1s", timeout="1s"),
        )
        c.agent.service.register(
            a.service,
            service_id=tcp_id,
            address=a.tcp_ip,
            port=8081,
            tags=["py", "check=tcp"],
            meta={"version": "3"},
            check=consul.Check.tcp(tcp_host, int(tcp_port), "1s", timeout="1s"),
        )
    except Exception as e:
        fail("registered", repr(e))
    step("registered", ids=[http_id, tcp_id])

    def both_passing():
        _, entries = c.health.service(a.service, passing=True)
        ids = sorted(e["Service"]["ID"] for e in entries)
        return None if ids == sorted([http_id, tcp_id]) else f"passing: {ids}"

    took = wait("passing", 20, both_passing)
    _, entries = c.health.service(a.service)
    step(
        "passing",
        took_s=took,
        checks={i: statuses(entries, i) for i in (http_id, tcp_id)},
    )

    services = c.agent.services()
    _, catalog = c.catalog.service(a.service)
    step(
        "views",
        agent={
            i: {k: services[i].get(k) for k in ("Service", "Address", "Port", "Tags", "Meta")}
            for i in (http_id, tcp_id)
            if i in services
        },
        catalog=sorted(
            (
                {
                    "id": e["ServiceID"],
                    "address": e["ServiceAddress"],
                    "port": e["ServicePort"],
                    "tags": e["ServiceTags"],
                    "meta": e["ServiceMeta"],
                }
                for e in catalog
            ),
            key=lambda e: e["id"],
        ),
    )

    for line in sys.stdin:
        command = line.strip()
        if command == "http-down":

            def http_critical():
                _, all_entries = c.health.service(a.service)
                checks = statuses(all_entries, http_id)
                if checks is None or "critical" not in checks.values():
                    return f"http check: {checks}"
                _, passing = c.health.service(a.service, passing=True)
                ids = sorted(e["Service"]["ID"] for e in passing)
                if ids != [tcp_id]:
                    return f"passing: {ids}"
                return None

            took = wait("http_critical", 40, http_critical)
            _, all_entries = c.health.service(a.service)
            step("http_critical", took_s=took, checks=statuses(all_entries, http_id))
        elif command == "persisted":

            def still_there():
                services = c.agent.services()
                _, catalog = c.catalog.service(a.service)
                ids = sorted(e["ServiceID"] for e in catalog)
                if http_id not in services or http_id not in ids:
                    return f"agent {sorted(services)}, catalog {ids}"
                return None

            wait("persisted", 30, still_there)
            services = c.agent.services()
            step(
                "persisted",
                ids=sorted(services),
                address=services[http_id]["Address"],
                meta=services[http_id]["Meta"],
            )
        elif command == "deregister":
            for i in (http_id, tcp_id):
                if not c.agent.service.deregister(i):
                    fail("deregistered", "deregister " + i + " answered false")
            services = c.agent.services()
            _, entries = c.health.service(a.service)
            left = [i for i in (http_id, tcp_id) if i in services] + [
                e["Service"]["ID"] for e in entries
            ]
            if left:
                fail("deregistered", f"still there: {left}")
            step("deregistered")
            return
        else:
            fail("command", "unknown command " + command)
    fail("command", "stdin closed before deregister")


main()
