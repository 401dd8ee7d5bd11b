//! The rule that keeps the tests on this machine: every instance address a test registers,
//! and every push target it names, is a loopback address (127.0.0.0/8) or one of the
//! network namespaces the tests build themselves ([`crate::netlab`]'s 10.231.0.0/16 and
//! 10.232.0.0/16).
//!
//! Why it matters: the Raft leader probes persistent instances by TCP (or HTTP) at the
//! address they were registered with, and pushes go to subscriber addresses, so a test
//! that registers `10.0.0.7` makes its node send connection attempts through the
//! machine's default route to a network nobody asked it to touch.
//!
//! The harness checks what it sends ([`crate::Node`]'s requests, the gRPC and fake-registry
//! helpers call [`check_ip`] or [`check_json`]) and panics with the offending address;
//! `tests/it/addresses.rs` scans the sources of `tests/` and `bench/` for IPv4 literals
//! outside these ranges. A string that is not an IPv4 address (`abc`, `999.1.1.1`) passes:
//! it is invalid input the server must refuse, and it goes nowhere.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Value;

/// Whether a test may use `ip` as an instance address or a push target.
pub fn allowed(ip: Ipv4Addr) -> bool {
    let [a, b, _, _] = ip.octets();
    a == 127 || (a == 10 && (b == 231 || b == 232))
}

/// Panics unless `text` is an allowed address, or is not an IP address at all.
#[track_caller]
pub fn check_ip(text: &str) {
    match text.trim().parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) if !allowed(ip) => panic!(
            "test address {ip} is outside 127.0.0.0/8 and the netlab subnets: tests register \
             only loopback addresses (persistent instances are probed and pushes are sent, so \
             any other address sends traffic beyond this machine); see tests/src/addresses.rs"
        ),
        Ok(IpAddr::V6(ip)) if ip != Ipv6Addr::LOCALHOST => panic!(
            "test address {ip} is not ::1: tests register only loopback addresses; see \
             tests/src/addresses.rs"
        ),
        _ => {}
    }
}

/// Panics if a JSON document names a disallowed address in an `ip` or `clientIp` field,
/// at any depth (an instance, a beat, a batch of instances).
#[track_caller]
pub fn check_json(value: &Value) {
    match value {
        Value::Object(map) => {
            for (key, field) in map {
                if is_address_key(key) {
                    if let Some(text) = field.as_str() {
                        check_ip(text);
                    }
                }
                check_json(field);
            }
        }
        Value::Array(items) => items.iter().for_each(check_json),
        _ => {}
    }
}

/// Panics if an HTTP request names a disallowed address in its query or urlencoded form:
/// the `ip` and `clientIP` parameters, and the JSON parameters that carry instances
/// (`beat`, `instance`, `instances`).
#[track_caller]
pub fn check_request(path_and_query: &str, form: Option<&str>) {
    let query = path_and_query.split_once('?').map(|(_, q)| q);
    for pairs in [query, form].into_iter().flatten() {
        for pair in pairs.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = decode(value);
            if is_address_key(key) {
                check_ip(&value);
            } else if matches!(key, "beat" | "instance" | "instances") {
                if let Ok(json) = serde_json::from_str::<Value>(&value) {
                    check_json(&json);
                }
            }
        }
    }
}

fn is_address_key(key: &str) -> bool {
    key.eq_ignore_ascii_case("ip") || key.eq_ignore_ascii_case("clientIp")
}

/// Percent- and plus-decodes a form value (lossy on bad UTF-8: only addresses matter).
fn decode(value: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes.get(i..i + 3) {
            Some([b'%', hi, lo]) => hex(*hi).zip(hex(*lo)).map(|(h, l)| h << 4 | l),
            _ => None,
        };
        match (escaped, bytes[i]) {
            (Some(b), _) => {
                out.push(b);
                i += 3;
            }
            (None, b'+') => {
                out.push(b' ');
                i += 1;
            }
            (None, b) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_netlab_pass_other_networks_panic() {
        check_ip("127.0.0.1");
        check_ip("127.40.1.3");
        check_ip("10.231.20.1");
        check_ip("::1");
        check_ip("not-an-ip");
        check_ip("999.1.1.1");
        for bad in [
            "10.0.0.1",
            "192.168.1.10",
            "8.8.8.8",
            "10.233.0.1",
            "fe80::1",
        ] {
            let outcome = std::panic::catch_unwind(|| check_ip(bad));
            assert!(outcome.is_err(), "{bad} was let through");
        }
    }

    #[test]
    fn requests_are_checked_in_query_form_and_json_parameters() {
        check_request(
            "/nacos/v1/ns/instance?serviceName=a&ip=127.0.0.5&port=1",
            None,
        );
        check_request("/nacos/v1/ns/instance", Some("ip=127.1.2.3&port=1"));
        let caught = |path: &'static str, form: Option<&'static str>| {
            std::panic::catch_unwind(|| check_request(path, form)).is_err()
        };
        assert!(caught("/x?serviceName=a&ip=10.1.0.1&port=1", None));
        assert!(caught("/x", Some("serviceName=a&IP=10.1.0.1")));
        assert!(caught("/x?udpPort=9&clientIP=192.168.0.1", None));
        assert!(caught(
            "/x?beat=%7B%22ip%22%3A%2210.0.0.1%22%2C%22port%22%3A80%7D",
            None
        ));
        assert!(caught(
            "/x",
            Some("instances=%5B%7B%22ip%22%3A%2210.0.0.1%22%7D%5D")
        ));
        check_json(&serde_json::json!({"instance": {"ip": "127.0.0.9", "port": 1}}));
        assert!(std::panic::catch_unwind(|| check_json(
            &serde_json::json!({"instances": [{"ip": "10.0.0.9"}]})
        ))
        .is_err());
    }
}
