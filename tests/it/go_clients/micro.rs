//! go-micro v4 traffic colouring against roster's lanes. Two versions of one go-micro
//! service (`v1.2` and `master`) register through a go-micro registry over nacos-sdk-go
//! v2 (gRPC, auth on); a go-micro client wrapper routes calls coloured `X-Lanes:
//! v1.2,master` to the first listed version that has a node. roster's `/api/v1/pick` with
//! `lanes=v1.2,master` (the service's lane key set to `version`) must name the very
//! instance go-micro called: while both run, after `v1.2` dies (its registry connection
//! drops without a deregistration: calls fall back to `master`), and after it returns.

use super::{run, scenario, step};
use roster_tests::{unique, Node, ADMIN_PASSWORD};

#[test]
fn go_micro_lanes_choose_what_roster_picks() {
    let node = Node::start();
    let service = unique("micro-lanes");
    let mut cmd = scenario("micro");
    cmd.args([
        "-server",
        &node.addr(),
        "-username",
        "nacos",
        "-password",
        ADMIN_PASSWORD,
        "-service",
        &service,
        "-lanes",
        "v1.2,master",
        "-preferred-host",
        "127.0.41.1",
        "-fallback-host",
        "127.0.41.2",
    ]);
    let steps = run(cmd, "the go-micro scenario");
    // The caller's registry cache watches the service before anything changes.
    step(&steps, "watching");

    // Uncoloured calls spread over both versions: the wrapper is what keeps a lane.
    let spread = &step(&steps, "uncoloured")["calls"];
    assert!(spread["v1.2"].as_u64().unwrap() > 0 && spread["master"].as_u64().unwrap() > 0);
    for (name, lanes, version, host) in [
        ("coloured", "v1.2,master", "v1.2", "127.0.41.1:"),
        (
            "unknown_lane_first",
            "hotfix,master",
            "master",
            "127.0.41.2:",
        ),
        ("fallback", "v1.2,master", "master", "127.0.41.2:"),
        ("recovered", "v1.2,master", "v1.2", "127.0.41.1:"),
    ] {
        let s = step(&steps, name);
        assert_eq!(s["lanes"], lanes, "{name}: {s}");
        assert_eq!(
            s["micro_version"], version,
            "{name}: go-micro's choice: {s}"
        );
        assert_eq!(s["pick_lane"], version, "{name}: roster's lane: {s}");
        assert_eq!(s["micro_addr"], s["pick_addr"], "{name}: one instance: {s}");
        let addr = s["micro_addr"].as_str().unwrap();
        assert!(addr.starts_with(host), "{name}: {addr}");
    }
    // The version that came back is a new process: a new port.
    assert_ne!(
        step(&steps, "coloured")["micro_addr"],
        step(&steps, "recovered")["micro_addr"]
    );
    step(&steps, "fallback_took");
    step(&steps, "done");

    // roster kept the lane key, and every instance left with its program.
    let detail = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/service?serviceName={service}"),
        )
        .expect(200)
        .json();
    assert_eq!(detail["laneKey"], "version", "{detail}");
    let list = node
        .call(
            "GET",
            &format!("/nacos/v1/ns/instance/list?serviceName={service}"),
        )
        .expect(200)
        .json();
    assert_eq!(list["hosts"].as_array().unwrap().len(), 0, "{list}");
}
