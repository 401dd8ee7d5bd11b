#!/usr/bin/env python3
"""Drive the unmodified nacos-sdk-python 0.1.16 v1 HTTP client (`nacos.NacosClient`)
against a roster node and check every answer the SDK gets back.

Prints one JSON object per step on stdout ({"step": ..., "ok": true, ...}).
Exit code 0 only if every check passed; otherwise the failing step is printed with
"ok": false and a one-line reason goes to stderr.

Usage:
  sdk_flow.py --server 127.0.0.1:8848 --username nacos --password P --service NAME
              [--namespace public] [--hold-seconds 20]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time

import nacos
from nacos.listener import Event, SubscribeListener

GROUP = "DEFAULT_GROUP"
CLUSTER = "DEFAULT"
BEAT_INTERVAL_S = 5  # the SDK's beat thread sleeps this long between beats
POLL_INTERVAL_S = 1  # subscribe() listener_interval
EVENT_WAIT_S = 8  # bounded wait for a listener event (several polls)
# roster's unhealthy timeout is 15 s (Nacos' instanceHeartBeatTimeOut); the server checks
# every few seconds, so allow this much beyond the hold for the unbeaten control instance.
CONTROL_GRACE_S = 12

INST1 = {"ip": "127.20.0.1", "port": 8080}
INST2 = {"ip": "127.20.0.2", "port": 8081}
# Registered without heartbeat_interval: proves the hold outlived the unhealthy timeout.
CONTROL = {"ip": "127.20.0.9", "port": 8089}


class CheckFailed(Exception):
    def __init__(self, step, message, **details):
        super().__init__(message)
        self.step = step
        self.details = details


def emit(step, ok=True, **fields):
    record = {"step": step, "ok": ok}
    record.update(fields)
    sys.stdout.write(json.dumps(record, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def hard_exit(code):
    sys.stdout.flush()
    sys.stderr.flush()
    # SDK timers are non-daemon threading.Timer objects; a timer that was mid-poll when it
    # was cancelled re-arms itself, so leave without waiting for stray threads.
    os._exit(code)


def find_host(hosts, inst):
    for h in hosts or []:
        if h.get("ip") == inst["ip"] and int(h.get("port", -1)) == inst["port"]:
            return h
    return None


def host_summary(h):
    if h is None:
        return None
    keys = ("instanceId", "ip", "port", "weight", "healthy", "enabled", "ephemeral",
            "clusterName", "serviceName", "metadata")
    return {k: h.get(k) for k in keys}


class EventLog:
    """Collects (event, instance dict) pairs from the SDK listener thread."""

    def __init__(self):
        self._cond = threading.Condition()
        self._events = []

    def __call__(self, event, slc, *args, **kwargs):
        with self._cond:
            self._events.append((event, dict(slc.instance)))
            self._cond.notify_all()

    def snapshot(self):
        with self._cond:
            return list(self._events)

    def wait_for(self, event, inst, timeout, since=0, pred=None):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for ev, host in self._events[since:]:
                    if ev == event and host.get("ip") == inst["ip"] \
                            and int(host.get("port", -1)) == inst["port"] \
                            and (pred is None or pred(host)):
                        return host
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    def __len__(self):
        with self._cond:
            return len(self._events)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="host:port of roster's HTTP API")
    ap.add_argument("--username", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--service", required=True)
    ap.add_argument("--namespace", default="public")
    ap.add_argument("--hold-seconds", type=float, default=20.0,
                    help="how long to let the SDK's beat thread keep the instances alive")
    args = ap.parse_args()

    # Whole-run watchdog: no step may hang the process.
    budget = args.hold_seconds + CONTROL_GRACE_S + 6 * EVENT_WAIT_S + 60

    def watchdog():
        emit("watchdog", ok=False, error="run exceeded %.0f s" % budget)
        sys.stderr.write("FAIL watchdog: run exceeded %.0f s\n" % budget)
        hard_exit(3)

    dog = threading.Timer(budget, watchdog)
    dog.daemon = True
    dog.start()

    log_dir = tempfile.mkdtemp(prefix="nacos-py-sdk-log-")
    state = {"client": None, "registered": []}
    code = 0
    try:
        flow(args, log_dir, state)
    except CheckFailed as e:
        emit(e.step, ok=False, error=str(e), **e.details)
        sys.stderr.write("FAIL %s: %s\n" % (e.step, e))
        code = 1
    except Exception as e:  # an unexpected SDK exception is a failed check too
        step = state.get("step", "start")
        emit(step, ok=False, error="unexpected %s: %s" % (type(e).__name__, e))
        sys.stderr.write("FAIL %s: unexpected %s: %s\n" % (step, type(e).__name__, e))
        code = 2
    finally:
        cleanup(state["client"], args.service, state["registered"])
        shutil.rmtree(log_dir, ignore_errors=True)
    if code == 0:
        emit("done", ok=True)
    hard_exit(code)


def cleanup(client, service, registered):
    """Best effort after a failure: deregister what this run registered, stop SDK threads."""
    if client is None:
        return
    try:
        client.stop_subscribe()
    except Exception:
        pass
    for inst in list(registered):
        try:
            client.remove_naming_instance(service, inst["ip"], inst["port"], cluster_name=CLUSTER,
                                          group_name=GROUP)
        except Exception:
            pass
    for task in list(getattr(client, "heartbeats", {}).values()):
        task.stop()


def flow(args, log_dir, state):
    service = args.service
    registered = state["registered"]

    # --- login (the constructor logs in when username/password are set) -----------------
    step = state["step"] = "login"
    try:
        client = nacos.NacosClient(args.server, namespace=args.namespace, username=args.username,
                                   password=args.password, logDir=log_dir)
    except Exception as e:
        raise CheckFailed(step, "NacosClient login failed: %s: %s" % (type(e).__name__, e))
    state["client"] = client
    if not client.token:
        raise CheckFailed(step, "login answered without an accessToken")
    emit(step, token_ttl=client.token_ttl)

    # --- register with the SDK's beat thread ---------------------------------------------
    step = state["step"] = "register"
    meta1 = {"sdk": "python", "version": "v1"}
    ok = client.add_naming_instance(service, INST1["ip"], INST1["port"], cluster_name=CLUSTER,
                                    weight=1.0, metadata=meta1, ephemeral=True, group_name=GROUP,
                                    heartbeat_interval=BEAT_INTERVAL_S)
    if not ok:
        raise CheckFailed(step, "add_naming_instance did not get 'ok'")
    registered.append(INST1)
    beat_key = "%s#%s#%s" % (service, INST1["ip"], INST1["port"])
    task = client.heartbeats.get(beat_key)
    if task is None or not task.is_alive():
        raise CheckFailed(step, "SDK beat thread for %s is not running" % beat_key)
    emit(step, instance=INST1, beat_interval_s=BEAT_INTERVAL_S)

    # --- list --------------------------------------------------------------------------
    step = state["step"] = "list"
    res = client.list_naming_instance(service, group_name=GROUP)
    hosts = res.get("hosts")
    h1 = find_host(hosts, INST1)
    if h1 is None:
        raise CheckFailed(step, "registered instance not in list", response=res)
    problems = []
    if h1.get("healthy") is not True:
        problems.append("healthy=%r" % h1.get("healthy"))
    if h1.get("enabled") is not True:
        problems.append("enabled=%r" % h1.get("enabled"))
    if h1.get("clusterName") != CLUSTER:
        problems.append("clusterName=%r" % h1.get("clusterName"))
    if (h1.get("metadata") or {}).get("version") != "v1":
        problems.append("metadata=%r" % h1.get("metadata"))
    if not h1.get("instanceId"):
        problems.append("no instanceId (the SDK's subscribe() keys on it)")
    if res.get("name") not in (service, "%s@@%s" % (GROUP, service)):
        problems.append("name=%r" % res.get("name"))
    if problems:
        raise CheckFailed(step, "bad host in list: " + ", ".join(problems), host=h1)
    emit(step, hosts=len(hosts), host=host_summary(h1))

    # --- subscribe, then a second instance must be reported ADDED ---------------------------
    step = state["step"] = "subscribe_added"
    events = EventLog()
    listener = SubscribeListener(fn=events, listener_name="roster-sdk-flow")
    # The first poll runs synchronously here and (SDK quirk) caches only the first host
    # without notifying; INST1 is the only host, so INST2 must come as ADDED afterwards.
    client.subscribe(listener, POLL_INTERVAL_S, service_name=service, group_name=GROUP)
    ok = client.add_naming_instance(service, INST2["ip"], INST2["port"], cluster_name=CLUSTER,
                                    weight=1.0, metadata={"sdk": "python", "role": "second"},
                                    ephemeral=True, group_name=GROUP,
                                    heartbeat_interval=BEAT_INTERVAL_S)
    if not ok:
        raise CheckFailed(step, "add_naming_instance (second) did not get 'ok'")
    registered.append(INST2)
    t0 = time.monotonic()
    added = events.wait_for(Event.ADDED, INST2, EVENT_WAIT_S)
    if added is None:
        raise CheckFailed(step, "listener did not report the second instance ADDED within %ss" % EVENT_WAIT_S,
                          events=[(e, host_summary(h)) for e, h in events.snapshot()])
    emit(step, instance=INST2, after_ms=int((time.monotonic() - t0) * 1000))

    # --- modify + get --------------------------------------------------------------------
    step = state["step"] = "modify"
    meta_mod = {"sdk": "python", "version": "v2", "modified": "yes"}
    mark = len(events)
    ok = client.modify_naming_instance(service, INST1["ip"], INST1["port"], cluster_name=CLUSTER,
                                       weight=3, metadata=meta_mod, ephemeral=True, group_name=GROUP)
    if not ok:
        raise CheckFailed(step, "modify_naming_instance did not get 'ok'")
    got = client.get_naming_instance(service, INST1["ip"], INST1["port"], cluster_name=CLUSTER)
    check_modified(step, got)
    modified = events.wait_for(Event.MODIFIED, INST1, EVENT_WAIT_S, since=mark,
                               pred=lambda h: float(h.get("weight", 0)) == 3.0)
    if modified is None:
        raise CheckFailed(step, "listener did not report the modification (MODIFIED, weight 3) within %ss"
                          % EVENT_WAIT_S, events=[(e, host_summary(h)) for e, h in events.snapshot()[mark:]])
    emit(step, weight=got.get("weight"), metadata=got.get("metadata"), listener_event="MODIFIED")

    # --- hold past the unhealthy timeout while the SDK beats ---------------------------------
    step = state["step"] = "hold"
    ok = client.add_naming_instance(service, CONTROL["ip"], CONTROL["port"], cluster_name=CLUSTER,
                                    weight=1.0, metadata={"sdk": "python", "role": "control-no-beat"},
                                    ephemeral=True, group_name=GROUP)
    if not ok:
        raise CheckFailed(step, "add_naming_instance (control, no heartbeat) did not get 'ok'")
    registered.append(CONTROL)
    hold_start = time.monotonic()
    deadline = hold_start + args.hold_seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(1.0, left))
    dead = [k for k, t in client.heartbeats.items() if not t.is_alive()]
    if dead:
        raise CheckFailed(step, "SDK beat threads died during the hold: %s" % dead)
    res = client.list_naming_instance(service, group_name=GROUP)
    hosts = res.get("hosts")
    for inst in (INST1, INST2):
        h = find_host(hosts, inst)
        if h is None or h.get("healthy") is not True:
            raise CheckFailed(step, "beaten instance %s:%s not listed healthy after %.0fs"
                              % (inst["ip"], inst["port"], args.hold_seconds),
                              host=host_summary(h), response=res)
    # The SDK's beats carry weight 1.0 and the original metadata; the PUT overrides must win.
    got = client.get_naming_instance(service, INST1["ip"], INST1["port"], cluster_name=CLUSTER)
    check_modified(step, got)
    # Control: without beats it must have gone unhealthy (or been deleted) by now.
    control_state = None
    grace_deadline = time.monotonic() + CONTROL_GRACE_S
    while True:
        res = client.list_naming_instance(service, group_name=GROUP)
        hc = find_host(res.get("hosts"), CONTROL)
        if hc is None or hc.get("healthy") is False:
            control_state = "removed" if hc is None else "unhealthy"
            # The same answer must still show the beaten instances healthy.
            for inst in (INST1, INST2):
                h = find_host(res.get("hosts"), inst)
                if h is None or h.get("healthy") is not True:
                    raise CheckFailed(step, "beaten instance %s:%s not healthy once the unbeaten control "
                                      "instance had expired" % (inst["ip"], inst["port"]),
                                      host=host_summary(h), response=res)
            break
        if time.monotonic() >= grace_deadline:
            raise CheckFailed(step, "control instance without beats still healthy %.0fs after registering; "
                              "the hold did not outlast the unhealthy timeout"
                              % (time.monotonic() - hold_start), host=host_summary(hc))
        time.sleep(0.5)
    emit(step, held_s=args.hold_seconds, beaten_healthy=2, weight_kept=got.get("weight"),
         control=control_state, control_after_s=round(time.monotonic() - hold_start, 1))

    # --- remove both, list must be empty ---------------------------------------------------
    step = state["step"] = "remove"
    mark = len(events)
    for inst in (INST1, INST2, CONTROL):
        ok = client.remove_naming_instance(service, inst["ip"], inst["port"], cluster_name=CLUSTER,
                                           ephemeral=True, group_name=GROUP)
        if not ok:
            raise CheckFailed(step, "remove_naming_instance %s:%s did not get 'ok'" % (inst["ip"], inst["port"]))
        registered.remove(inst)
    res = None
    deadline = time.monotonic() + 3
    while True:
        res = client.list_naming_instance(service, group_name=GROUP)
        if not res.get("hosts"):
            break
        if time.monotonic() >= deadline:
            raise CheckFailed(step, "list not empty after removing every instance",
                              hosts=[host_summary(h) for h in res.get("hosts")])
        time.sleep(0.3)
    for inst in (INST1, INST2):
        if events.wait_for(Event.DELETED, inst, EVENT_WAIT_S, since=mark) is None:
            raise CheckFailed(step, "listener did not report %s:%s DELETED within %ss"
                              % (inst["ip"], inst["port"], EVENT_WAIT_S),
                              events=[(e, host_summary(h)) for e, h in events.snapshot()[mark:]])
    emit(step, hosts=0, listener_event="DELETED")

    # --- stop the SDK's threads ------------------------------------------------------------
    step = state["step"] = "shutdown"
    client.unsubscribe(service)
    client.stop_subscribe()
    for task in client.heartbeats.values():
        task.stop()
    deadline = time.monotonic() + BEAT_INTERVAL_S + 2
    while time.monotonic() < deadline and any(t.is_alive() for t in client.heartbeats.values()):
        time.sleep(0.2)
    beats_alive = sum(1 for t in client.heartbeats.values() if t.is_alive())
    if beats_alive:
        raise CheckFailed(step, "%d SDK beat threads still running after stop" % beats_alive)
    emit(step, beat_threads_alive=0)


def check_modified(step, got):
    if not isinstance(got, dict):
        raise CheckFailed(step, "get_naming_instance returned %r" % (got,))
    problems = []
    try:
        if float(got.get("weight")) != 3.0:
            problems.append("weight=%r (want 3)" % got.get("weight"))
    except (TypeError, ValueError):
        problems.append("weight=%r (want 3)" % got.get("weight"))
    md = got.get("metadata") or {}
    if md.get("modified") != "yes" or md.get("version") != "v2":
        problems.append("metadata=%r (want modified=yes, version=v2)" % md)
    if got.get("ip") != INST1["ip"] or int(got.get("port", -1)) != INST1["port"]:
        problems.append("ip:port=%r:%r" % (got.get("ip"), got.get("port")))
    if problems:
        raise CheckFailed(step, "get_naming_instance: " + ", ".join(problems), response=got)


if __name__ == "__main__":
    main()
