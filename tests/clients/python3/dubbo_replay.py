#!/usr/bin/env python3
"""Replay Dubbo 3's application-level discovery over Nacos, through the unmodified
nacos-sdk-python 3.x gRPC client (config and naming), against roster.

What Dubbo 3 does, and this replays step for step:

- provider, service-name mapping (MetadataServiceNameMapping.map and
  AbstractMetadataReport.registerServiceAppMapping): read the config
  `dataId=<interface>, group=mapping` with its md5; if the application is listed, done;
  otherwise publish `<old>,<app>` with `casMd5=<md5 read>` and retry (casRetryTimes)
  when the compare-and-set is refused;
- provider, metadata report (NacosMetadataReport.publishAppMetadata): publish the
  application's MetadataInfo as JSON at `dataId=<application>, group=<revision>`;
- provider, registration: the application's instance in naming (service = application
  name) with Dubbo's metadata keys, `dubbo.metadata.revision` among them;
- consumer: listen to the mapping (addServiceMappingListener), read it
  (getServiceAppMapping), and for each application list its instances, read each
  instance's revision, fetch the metadata at `<application>/<revision>` and find the
  interface in it.

The providers run at once, each with its own client connections, spread over the
nodes given with --server (a cluster: the compare-and-set is decided by Raft, not by the
node a provider talks to). The first provider creates the mapping before the others
start, with the ticket Dubbo 3.3 (Java) sends for a mapping that does not exist yet,
`casMd5=0`, which roster takes as "insert if absent" (the real client is run by
tests/it/java_clients/dubbo.rs); against Nacos, which inserts whatever the md5, two first
providers racing there could overwrite each other.

Prints one JSON object per step; exit code 0 only when every check passed.

Usage:
  dubbo_replay.py --server 127.0.0.1:8848 [--server 127.0.0.1:8850 ...]
                  --username nacos --password P [--providers 8] [--interface NAME]
"""

import argparse
import asyncio
import hashlib
import json
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
import time

from v2.nacos import (ClientConfigBuilder, ConfigParam, GRPCConfig,
                      ListInstanceParam, NacosConfigService, NacosException,
                      NacosNamingService, RegisterInstanceParam)

MAPPING_GROUP = "mapping"
CAS_RETRIES = 30
CALL_TIMEOUT_S = 10


def emit(step, ok=True, **fields):
    print(json.dumps({"step": step, "ok": ok, **fields}), flush=True)


# The SDKs' log and cache directory, removed on every way out (os._exit skips finally).
TMP = tempfile.mkdtemp(prefix="dubbo-replay-")


def leave(code):
    shutil.rmtree(TMP, ignore_errors=True)
    os._exit(code)


def fail(step, reason):
    emit(step, ok=False, reason=reason)
    sys.stderr.write(f"FAIL {step}: {reason}\n")
    sys.stderr.flush()
    leave(1)


def md5(text):
    return hashlib.md5(text.encode("utf-8")).hexdigest()


def client_config(args, server, tmp, name):
    return (ClientConfigBuilder()
            .server_address(server)
            .username(args.username)
            .password(args.password)
            .log_dir(os.path.join(tmp, "logs"))
            .cache_dir(os.path.join(tmp, "cache-" + name))
            .log_level(logging.INFO)
            .load_cache_at_start(False)
            .grpc_config(GRPCConfig(grpc_timeout=5000))
            .build())


async def call(step, what, coro):
    try:
        return await asyncio.wait_for(coro, CALL_TIMEOUT_S)
    except asyncio.TimeoutError:
        fail(step, f"{what} did not answer within {CALL_TIMEOUT_S}s")


def metadata_info(app, interface):
    """A Dubbo MetadataInfo as the metadata report stores it (JSON)."""
    return json.dumps({
        "app": app,
        "services": {
            f"{interface}:dubbo": {
                "name": interface,
                "protocol": "dubbo",
                "port": 20880,
                "path": interface,
                "params": {"side": "provider", "release": "3.2.11", "methods": "sayHello,sayHelloAsync",
                           "deprecated": "false", "dubbo": "2.0.2", "interface": interface,
                           "service-name-mapping": "true", "generic": "false",
                           "application": app, "background": "false", "dynamic": "true",
                           "anyhost": "true"},
            }
        },
    }, sort_keys=True)


async def map_app(step, config, interface, app):
    """Dubbo's registerServiceAppMapping with its retries: returns the attempts it took
    and how many compare-and-sets were refused."""
    refused = 0
    for attempt in range(1, CAS_RETRIES + 1):
        content = await call(step, "get_config(mapping)", config.get_config(
            ConfigParam(data_id=interface, group=MAPPING_GROUP)))
        apps = [a for a in (content or "").split(",") if a]
        if app in apps:
            return attempt, refused
        new = ",".join(apps + [app])
        # Dubbo 3.3's ticket for a mapping that does not exist yet is "0": roster inserts
        # it only if it is still absent, so a racing first provider retries.
        ticket = md5(content) if content else "0"
        try:
            ok = await call(step, "publish_config(cas)", config.publish_config(
                ConfigParam(data_id=interface, group=MAPPING_GROUP, content=new, cas_md5=ticket)))
        except NacosException as e:
            ok = False
            if "Cas" not in str(e) and "cas" not in str(e) and "md5" not in str(e):
                fail(step, f"the publication failed for another reason than the compare-and-set: {e}")
        if ok:
            # As Dubbo: a publication that was accepted is the mapping done.
            return attempt, refused
        refused += 1
        await asyncio.sleep(random.uniform(0.01, 0.1))
    fail(step, f"{app} not mapped after {CAS_RETRIES} attempts")


async def provider(args, tmp, index, server, interface, go):
    app = f"dubbo-demo-provider-{index}"
    step = f"provider_{index}"
    config = await call(step, "create_config_service", NacosConfigService.create_config_service(
        client_config(args, server, tmp, f"p{index}")))
    naming = await call(step, "create_naming_service", NacosNamingService.create_naming_service(
        client_config(args, server, tmp, f"pn{index}")))
    await go.wait()
    attempts, refused = await map_app(step, config, interface, app)
    meta = metadata_info(app, interface)
    revision = md5(meta)
    ok = await call(step, "publish_config(metadata)", config.publish_config(
        ConfigParam(data_id=app, group=revision, content=meta, type="json")))
    if not ok:
        fail(step, "the metadata report was not stored")
    ok = await call(step, "register_instance", naming.register_instance(RegisterInstanceParam(
        service_name=app, group_name="DEFAULT_GROUP", ip=f"127.71.0.{index + 1}", port=20880,
        weight=1.0, cluster_name="DEFAULT", ephemeral=True, enabled=True, healthy=True,
        metadata={
            "dubbo.metadata.revision": revision,
            "dubbo.metadata.storage-type": "remote",
            "dubbo.endpoints": '[{"port":20880,"protocol":"dubbo"}]',
            "dubbo.metadata-service.url-params": '{"connections":"1","version":"1.0.0",'
                                                 '"dubbo":"2.0.2","side":"provider","port":"20880","protocol":"dubbo"}',
            "timestamp": str(int(time.time() * 1000)),
            "application": app,
            "side": "provider",
            "release": "3.2.11",
        })))
    if not ok:
        fail(step, "the instance was not registered")
    emit(step, app=app, server=server, revision=revision, attempts=attempts, refused=refused)
    return app, config, naming


async def consume(step, config, naming, interface, expected):
    """The consumer's path: mapping → applications → instances → revision → metadata."""
    content = await call(step, "get_config(mapping)", config.get_config(
        ConfigParam(data_id=interface, group=MAPPING_GROUP)))
    apps = sorted(a for a in (content or "").split(",") if a)
    if apps != sorted(expected):
        missing = sorted(set(expected) - set(apps))
        fail(step, f"the mapping lost applications: {missing}; it holds {apps}")
    resolved = {}
    for app in apps:
        # An instance registered through another node arrives by Distro replication:
        # within moments, not at once (a Dubbo consumer subscribes and is pushed it).
        deadline = time.monotonic() + 10
        while True:
            instances = await call(step, "list_instances", naming.list_instances(ListInstanceParam(
                service_name=app, group_name="DEFAULT_GROUP", healthy_only=True, subscribe=False)))
            if len(instances) == 1 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        if len(instances) != 1:
            fail(step, f"{app} has {len(instances)} instances, not 1")
        revision = instances[0].metadata.get("dubbo.metadata.revision")
        if not revision:
            fail(step, f"{app}'s instance carries no revision: {instances[0].metadata}")
        meta = await call(step, "get_config(metadata)", config.get_config(
            ConfigParam(data_id=app, group=revision)))
        if not meta:
            fail(step, f"no metadata at {app}/{revision}")
        if md5(meta) != revision:
            fail(step, f"the metadata at {app}/{revision} is not what was published")
        services = json.loads(meta)["services"]
        if f"{interface}:dubbo" not in services:
            fail(step, f"{app}'s metadata lacks {interface}: {list(services)}")
        resolved[app] = f"{instances[0].ip}:{instances[0].port}"
    return resolved


async def run(args):
    tmp = TMP
    interface = args.interface
    servers = args.server
    # The consumer listens to the mapping before any provider starts, on the last node.
    consumer_cfg = await call("consumer", "create_config_service", NacosConfigService.create_config_service(
        client_config(args, servers[-1], tmp, "c")))
    consumer_naming = await call("consumer", "create_naming_service", NacosNamingService.create_naming_service(
        client_config(args, servers[-1], tmp, "cn")))
    heard = []

    async def on_mapping(tenant, group, data_id, content):
        heard.append(content)

    await call("consumer", "add_listener", consumer_cfg.add_listener(interface, MAPPING_GROUP, on_mapping))
    emit("consumer_listens", server=servers[-1])

    go = asyncio.Event()
    # The first provider creates the mapping alone; the others append at once.
    go.set()
    first = await provider(args, tmp, 0, servers[0], interface, go)
    go = asyncio.Event()
    others = [asyncio.create_task(provider(args, tmp, i, servers[i % len(servers)], interface, go))
              for i in range(1, args.providers)]
    await asyncio.sleep(0.5)  # every client connected: start together
    go.set()
    done = [first] + [await t for t in others]
    expected = [app for app, _, _ in done]
    emit("providers_done", apps=len(expected))

    # Reads are local to a node: the last publication reaches the consumer's node
    # within a moment.
    deadline = time.monotonic() + 10
    while True:
        content = await consumer_cfg.get_config(ConfigParam(data_id=interface, group=MAPPING_GROUP))
        if sorted(a for a in (content or "").split(",") if a) == sorted(expected):
            break
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    resolved = await consume("consume", consumer_cfg, consumer_naming, interface, expected)
    emit("consume", resolved=resolved)

    # The consumer's mapping listener heard the final mapping (a push, then its query).
    deadline = time.monotonic() + 10
    while not (heard and sorted(a for a in heard[-1].split(",") if a) == sorted(expected)):
        if time.monotonic() > deadline:
            fail("mapping_listener", f"the listener never heard the full mapping; it heard {heard[-3:]}")
        await asyncio.sleep(0.2)
    emit("mapping_listener", notifications=len(heard))

    for _, config, naming in done:
        await config.shutdown()
        await naming.shutdown()
    await consumer_cfg.shutdown()
    await consumer_naming.shutdown()
    emit("done")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", action="append", required=True)
    ap.add_argument("--username", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--providers", type=int, default=8)
    ap.add_argument("--interface", default="org.apache.dubbo.demo.DemoService")
    ap.add_argument("--watchdog-seconds", type=float, default=120)
    args = ap.parse_args()
    timer = threading.Timer(args.watchdog_seconds,
                            lambda: fail("watchdog", f"whole run exceeded {args.watchdog_seconds}s"))
    timer.daemon = True
    timer.start()

    async def run_and_exit():
        await run(args)
        sys.stdout.flush()
        # Exit from inside the loop: asyncio.run's teardown would wait on the SDK's tasks.
        leave(0)

    asyncio.run(run_and_exit())


if __name__ == "__main__":
    main()
