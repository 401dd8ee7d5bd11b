//! The naming rules, in one place for every protocol face: what a namespace id, group,
//! service name, cluster, address, port, weight and metadata may be, as Nacos defines
//! them (and where Nacos is lax, what roster refuses with a reason). Each check names
//! the field and the problem in an [`Invalid`], which the faces answer in their own
//! shape (`crate::error::Error`).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::IpAddr;

use super::instance::{Metadata, BEAT_INTERVAL_KEY, BEAT_TIMEOUT_KEY, DELETE_TIMEOUT_KEY};
use super::service::HealthChecker;
use super::Registration;

/// The default group.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// The default cluster.
pub const DEFAULT_CLUSTER: &str = "DEFAULT";

/// Which rule a value broke, as far as a client's error code tells (Nacos v2 gives
/// weights and metadata codes of their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The field is required and absent.
    Missing,
    /// A weight outside 0..=10000.
    Weight,
    /// Malformed or oversized metadata.
    Metadata,
    /// Any other rule.
    Other,
}

/// A value that breaks a naming rule: the field, the rule, and what to tell the client
/// (in Nacos' words where clients depend on them).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Invalid {
    /// The parameter, as the client named it.
    pub field: String,
    /// Which rule.
    pub problem: Problem,
    /// The message.
    pub message: String,
}

impl Invalid {
    /// `field` breaks `problem`'s rule.
    pub fn new(field: &str, problem: Problem, message: impl Into<String>) -> Self {
        Self {
            field: field.to_string(),
            problem,
            message: message.into(),
        }
    }

    /// `field` is required, in Nacos' words.
    pub fn missing(field: &str) -> Self {
        Self::new(
            field,
            Problem::Missing,
            format!("Param '{field}' is required."),
        )
    }

    /// `field`'s value is illegal, in Nacos' words.
    pub fn illegal(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::new(
            field,
            Problem::Other,
            format!("Param '{field}' is illegal, {problem}"),
        )
    }

    /// `field`'s metadata is illegal, in Nacos' words.
    pub fn metadata(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::new(
            field,
            Problem::Metadata,
            format!("Param '{field}' is illegal, {problem}"),
        )
    }
}

/// Parses a boolean as Nacos clients send it.
pub fn parse_bool(key: &str, value: &str) -> Result<bool, Invalid> {
    const TRUE: [&str; 6] = ["true", "t", "yes", "y", "on", "1"];
    const FALSE: [&str; 6] = ["false", "f", "no", "n", "off", "0"];
    let v = value.trim();
    if TRUE.iter().any(|t| t.eq_ignore_ascii_case(v)) {
        return Ok(true);
    }
    if FALSE.iter().any(|f| f.eq_ignore_ascii_case(v)) {
        return Ok(false);
    }
    Err(Invalid::illegal(
        key,
        format!("'{value}' is not a boolean (true or false)."),
    ))
}

/// Parses a port, 0 to 65535.
pub fn parse_port(key: &str, value: &str) -> Result<u16, Invalid> {
    let port = value.trim().parse::<i64>().map_err(|_| port_range(key))?;
    check_port(key, port)
}

/// Checks a port given as a number (JSON bodies): 0 to 65535.
pub fn check_port(key: &str, port: i64) -> Result<u16, Invalid> {
    u16::try_from(port).map_err(|_| port_range(key))
}

fn port_range(key: &str) -> Invalid {
    Invalid::illegal(key, "the value should be between 0 and 65535.")
}

/// Parses a weight, 0 to 10000.
pub fn parse_weight(key: &str, value: &str) -> Result<f64, Invalid> {
    let w: f64 = value
        .trim()
        .parse()
        .map_err(|_| Invalid::illegal(key, format!("'{value}' is not a number.")))?;
    check_weight(w)
}

/// Checks a weight given as a number (JSON bodies): 0 to 10000.
pub fn check_weight(weight: f64) -> Result<f64, Invalid> {
    if !weight.is_finite() || !(0.0..=10000.0).contains(&weight) {
        return Err(Invalid::new(
            "weight",
            Problem::Weight,
            "instance format invalid: The weights range from 0.0 to 10000.0",
        ));
    }
    Ok(weight)
}

/// Checks an instance address and returns it as roster keeps it: an IPv4 address as a
/// canonical dotted quad (four decimal parts 0-255, no leading zeros), an IPv6 address
/// in RFC 5952 form (an IPv4-mapped one, `::ffff:a.b.c.d`, as the IPv4 address), or a
/// host name per RFC 1123 whose last label is not a number. Borrowed when `ip` already
/// is in that form.
///
/// Host names stay (Nacos clients register them where pods have no stable IP), but a
/// name that is all digits and dots must be an IPv4 address: `999.1.1.1`, `1.1.1` and
/// `01.02.03.004` would otherwise be kept as names that resolvers read as addresses
/// (`inet_aton` takes `1.1.1` for 1.1.0.1 and `010` as octal), and `0x7f000001` likewise.
pub fn check_ip<'a>(key: &str, ip: &'a str) -> Result<Cow<'a, str>, Invalid> {
    if let Ok(addr) = ip.parse::<IpAddr>() {
        // Rust's parser takes only canonical dotted quads, so IPv4 is as given.
        let normal = match addr {
            IpAddr::V4(_) => return Ok(Cow::Borrowed(ip)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => v6.to_string(),
            },
        };
        return Ok(if normal == ip {
            Cow::Borrowed(ip)
        } else {
            Cow::Owned(normal)
        });
    }
    if !ip.is_empty() && ip.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(Invalid::illegal(
            key,
            format!(
                "'{ip}' is not an IPv4 address: four decimal numbers from 0 to 255, without leading zeros."
            ),
        ));
    }
    if is_host_name(ip) {
        Ok(Cow::Borrowed(ip))
    } else {
        Err(Invalid::illegal(
            key,
            format!("'{ip}' is not an IP address or host name."),
        ))
    }
}

/// A host name per RFC 1123 (labels of letters, digits and inner hyphens, 1 to 63
/// characters, 253 in all) whose last label is not a number in any base `inet_aton`
/// reads (decimal, or hexadecimal written `0x...`), so that no resolver takes it for
/// an address.
fn is_host_name(name: &str) -> bool {
    let labels_ok = name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    let last = name.rsplit('.').next().unwrap_or("");
    let hex = last.get(..2).is_some_and(|p| p.eq_ignore_ascii_case("0x"))
        && last[2..].bytes().all(|b| b.is_ascii_hexdigit());
    let numeric = hex || last.bytes().all(|b| b.is_ascii_digit());
    labels_ok && !numeric
}

/// Checks a namespace id: 1 to 128 of `[A-Za-z0-9_-]`.
pub fn check_namespace_id(key: &str, id: &str) -> Result<(), Invalid> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Invalid::illegal(
            key,
            "it should be 1 to 128 characters of letters, digits, '_' and '-'.",
        ))
    }
}

/// Checks a group: up to 128 of `[A-Za-z0-9-_:.]`.
pub fn check_group(group: &str) -> Result<(), Invalid> {
    let ok = group.len() <= 128
        && group
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Invalid::illegal(
            "groupName",
            "it should be up to 128 characters of letters, digits and '-_:.'.",
        ))
    }
}

/// Checks a service name (without group): 1 to 512 characters, no whitespace or control
/// characters, no leading '@' and no '@@'.
pub fn check_service_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() {
        return Err(Invalid::missing("serviceName"));
    }
    if name.chars().count() > 512 {
        return Err(Invalid::illegal(
            "serviceName",
            "the param length should not exceed 512.",
        ));
    }
    if name.starts_with('@')
        || name.contains("@@")
        || name.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Invalid::illegal(
            "serviceName",
            "illegal characters should not appear in the param.",
        ));
    }
    Ok(())
}

/// Checks a cluster name at registration: `[0-9a-zA-Z-]`, up to 64 (Nacos' rule).
pub fn check_cluster_name(cluster: &str) -> Result<(), Invalid> {
    let ok = !cluster.is_empty()
        && cluster.len() <= 64
        && cluster
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Invalid::new(
            "clusterName",
            Problem::Other,
            format!(
                "Instance 'clusterName' should be characters with only 0-9a-zA-Z-. (current: {cluster})"
            ),
        ))
    }
}

/// Splits and checks a comma-separated cluster filter (`[0-9a-zA-Z-_]` each).
pub fn parse_cluster_list(raw: &str) -> Result<Vec<&str>, Invalid> {
    let clusters: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    for c in &clusters {
        let ok = c.len() <= 64
            && c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return Err(Invalid::illegal(
                "clusters",
                format!("'{c}' should be up to 64 characters of letters, digits, '-' and '_'."),
            ));
        }
    }
    Ok(clusters)
}

/// Parses metadata: a JSON object (values become strings) or `k=v,k2=v2`.
pub fn parse_metadata(key: &str, raw: &str, max_bytes: usize) -> Result<Metadata, Invalid> {
    let metadata = read_metadata(key, raw)?;
    check_metadata(key, &metadata, max_bytes)?;
    Ok(metadata)
}

/// Reads metadata as [`parse_metadata`] does, without its checks (for a registration,
/// which [`registration`] checks whole).
pub fn read_metadata(key: &str, raw: &str) -> Result<Metadata, Invalid> {
    let metadata = if raw.trim_start().starts_with('{') {
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(raw)
            .map_err(|e| Invalid::metadata(key, format!("it is not a valid JSON object: {e}.")))?;
        object
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Null => String::new(),
                    other => other.to_string(),
                };
                (k, v)
            })
            .collect()
    } else {
        let mut m = BTreeMap::new();
        for segment in raw.split(',').filter(|s| !s.trim().is_empty()) {
            let parts: Vec<&str> = segment.split('=').collect();
            if parts.len() != 2 {
                return Err(Invalid::new(
                    key,
                    Problem::Metadata,
                    format!("metadata format incorrect:{raw}"),
                ));
            }
            m.insert(parts[0].trim().to_string(), parts[1].trim().to_string());
        }
        m
    };
    Ok(metadata)
}

/// Checks parsed metadata: its size (keys plus values) and the heartbeat rule.
pub fn check_metadata(key: &str, metadata: &Metadata, max_bytes: usize) -> Result<(), Invalid> {
    let size: usize = metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > max_bytes {
        return Err(Invalid::metadata(
            key,
            format!("the param length should not exceed {max_bytes}."),
        ));
    }
    check_heartbeat_metadata(metadata)
}

/// Nacos' rule: the beat interval must be below the beat and delete timeouts.
fn check_heartbeat_metadata(metadata: &Metadata) -> Result<(), Invalid> {
    let read = |k: &str| metadata.get(k).and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(interval) = read(BEAT_INTERVAL_KEY) {
        let timeout = read(BEAT_TIMEOUT_KEY).unwrap_or(15_000);
        let delete = read(DELETE_TIMEOUT_KEY).unwrap_or(30_000);
        if timeout < interval || delete < interval {
            return Err(Invalid::new(
                "metadata",
                Problem::Other,
                "Instance 'heart beat interval' must less than 'heart beat timeout' and 'ip delete timeout'.",
            ));
        }
    }
    Ok(())
}

/// Longest path of an HTTP health check, in bytes.
pub const MAX_CHECK_PATH: usize = 1024;
/// Longest header list of an HTTP health check (`Name:value|Name:value`), in bytes.
pub const MAX_CHECK_HEADERS: usize = 2048;
/// Headers the prober writes itself and a cluster may not set: the probe is one GET
/// without a body on a connection it closes.
const PROBER_HEADERS: [&str; 3] = ["connection", "content-length", "transfer-encoding"];

/// Checks a cluster's health checker: an HTTP checker's path, headers and expected
/// code must make exactly one well-formed request (no CR, LF or other control
/// characters to inject header lines or a second request with). Applied when the
/// settings are stored and again before each probe is written.
pub fn check_health_checker(checker: &HealthChecker) -> Result<(), Invalid> {
    if let HealthChecker::Http {
        path,
        headers,
        expected_code,
    } = checker
    {
        check_health_check_path(path)?;
        health_check_headers(headers)?;
        if !(100..=599).contains(expected_code) {
            return Err(Invalid::illegal(
                "healthChecker.expectedResponseCode",
                "it should be an HTTP status code from 100 to 599.",
            ));
        }
    }
    Ok(())
}

/// An HTTP health check's path: empty (meaning `/`, as the Nacos console sends it) or
/// `/` followed by visible ASCII (no spaces, no control characters), at most
/// [`MAX_CHECK_PATH`] bytes.
pub fn check_health_check_path(path: &str) -> Result<(), Invalid> {
    let ok = path.is_empty()
        || (path.starts_with('/')
            && path.len() <= MAX_CHECK_PATH
            && path.bytes().all(|b| b.is_ascii_graphic()));
    if ok {
        Ok(())
    } else {
        Err(Invalid::illegal(
            "healthChecker.path",
            format!(
                "it should start with '/' and hold only visible ASCII characters (no spaces or control characters; percent-encode others), at most {MAX_CHECK_PATH} bytes."
            ),
        ))
    }
}

/// The headers of an HTTP health check, `Name:value` pairs separated by `|` (Nacos'
/// format; empty pieces are skipped, spaces around names and values trimmed): each name
/// an RFC 7230 token that the prober does not write itself, each value printable ASCII,
/// at most [`MAX_CHECK_HEADERS`] bytes in all.
pub fn health_check_headers(raw: &str) -> Result<Vec<(&str, &str)>, Invalid> {
    const FIELD: &str = "healthChecker.headers";
    if raw.len() > MAX_CHECK_HEADERS {
        return Err(Invalid::illegal(
            FIELD,
            format!("the headers should not exceed {MAX_CHECK_HEADERS} bytes."),
        ));
    }
    let mut pairs = Vec::new();
    for piece in raw.split('|').filter(|p| !p.trim().is_empty()) {
        let Some((name, value)) = piece.split_once(':') else {
            return Err(Invalid::illegal(
                FIELD,
                format!("{piece:?} is not a header (Name:value)."),
            ));
        };
        let (name, value) = (name.trim_matches(' '), value.trim_matches(' '));
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(Invalid::illegal(
                FIELD,
                format!("the header name {name:?} is not an HTTP token."),
            ));
        }
        if PROBER_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name)) {
            return Err(Invalid::illegal(
                FIELD,
                format!("the header {name} is written by the health checker itself."),
            ));
        }
        if !value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
            return Err(Invalid::illegal(
                FIELD,
                format!("the value of header {name} holds control or non-ASCII characters."),
            ));
        }
        pairs.push((name, value));
    }
    Ok(pairs)
}

/// RFC 7230 `tchar`.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Where a registration came from, which decides what a refusal calls its fields and
/// whether it is kept as given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// HTTP v1 and v2 parameters: refusals name `ip` and `metadata`.
    Http,
    /// A gRPC instance: refusals name `instance.ip` and `instance.metadata`.
    Grpc,
    /// A sync task's import, named as HTTP's parameters. Kept as the source gives it:
    /// the address is not rewritten to roster's form (the task matches what it holds
    /// against the source by address), and the weight is the source's, unchecked.
    Import,
}

impl Origin {
    fn ip(self) -> &'static str {
        match self {
            Origin::Grpc => "instance.ip",
            Origin::Http | Origin::Import => "ip",
        }
    }

    fn metadata(self) -> &'static str {
        match self {
            Origin::Grpc => "instance.metadata",
            Origin::Http | Origin::Import => "metadata",
        }
    }
}

/// The one check of a registration, whichever face it came through (each face parses
/// its wire format into a [`Registration`] first): the address (put in the form
/// instances are kept in, see [`check_ip`], unless it is an import), the cluster, the
/// weight (not an import's) and the metadata, in that order; the first rule broken is
/// the refusal.
pub fn registration(
    reg: &mut Registration,
    origin: Origin,
    max_metadata_bytes: usize,
) -> Result<(), Invalid> {
    if let Cow::Owned(normal) = check_ip(origin.ip(), &reg.ip)? {
        if origin != Origin::Import {
            reg.ip = normal;
        }
    }
    check_cluster_name(&reg.cluster)?;
    if origin != Origin::Import {
        check_weight(reg.weight)?;
    }
    check_metadata(origin.metadata(), &reg.metadata, max_metadata_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_ports_weights() {
        assert!(parse_bool("x", "True").unwrap());
        assert!(!parse_bool("x", "off").unwrap());
        assert!(parse_bool("x", "maybe")
            .unwrap_err()
            .message
            .contains("'x'"));
        assert_eq!(parse_port("port", "8080").unwrap(), 8080);
        assert_eq!(
            parse_port("port", "99999").unwrap_err().message,
            "Param 'port' is illegal, the value should be between 0 and 65535."
        );
        assert!(parse_port("port", "abc").is_err());
        assert_eq!(
            parse_weight("weight", "20000").unwrap_err().message,
            "instance format invalid: The weights range from 0.0 to 10000.0"
        );
        assert!(parse_weight("weight", "NaN").is_err());
        assert_eq!(parse_weight("weight", "2.5").unwrap(), 2.5);
    }

    #[test]
    fn ips_and_clusters() {
        check_ip("ip", "10.0.0.1").unwrap();
        check_ip("ip", "::1").unwrap();
        check_ip("ip", "host-1.example").unwrap();
        assert!(check_ip("ip", "10.0.0.1 ").is_err());
        assert!(check_ip("ip", "a..b").is_err());
        assert!(check_ip("ip", "bad_host").is_err());
        check_cluster_name("None").unwrap();
        assert_eq!(
            check_cluster_name("a_b").unwrap_err().message,
            "Instance 'clusterName' should be characters with only 0-9a-zA-Z-. (current: a_b)"
        );
        assert_eq!(
            parse_cluster_list("DEFAULT, b_1").unwrap(),
            ["DEFAULT", "b_1"]
        );
        assert!(parse_cluster_list("a b").is_err());
    }

    #[test]
    fn ipv4_only_as_a_canonical_dotted_quad() {
        for bad in [
            "999.1.1.1",
            "1.1.1",
            "01.02.03.004",
            "1.2.3.4.5",
            "256.0.0.1",
            "127.1",
            "2130706433",
            "1..1.1",
            ".1.1.1",
        ] {
            let e = check_ip("ip", bad).unwrap_err();
            assert!(
                e.message.contains("is not an IPv4 address") && e.field == "ip",
                "{bad}: {e}"
            );
        }
        // Names a resolver would read as a number are not host names either.
        for bad in ["0x7f000001", "host.0x1", "host.123", "a.-b", "-a", "a_b.c"] {
            assert!(check_ip("ip", bad).is_err(), "{bad}");
        }
        for good in ["0.0.0.0", "255.255.255.255", "127.0.0.1", "10.231.0.7"] {
            assert!(matches!(check_ip("ip", good), Ok(Cow::Borrowed(g)) if g == good));
        }
        for good in [
            "localhost",
            "pod-0.orders.svc",
            "1a.example",
            "x1",
            "host.0x1g",
        ] {
            assert!(
                matches!(check_ip("ip", good), Ok(Cow::Borrowed(_))),
                "{good}"
            );
        }
    }

    #[test]
    fn ipv6_is_normalized() {
        let table = [
            ("::1", "::1"),
            ("0:0:0:0:0:0:0:1", "::1"),
            ("FE80:0000:0000:0000:0000:0000:0000:0001", "fe80::1"),
            ("2001:DB8::0:1", "2001:db8::1"),
            ("::FFFF:127.0.0.1", "127.0.0.1"),
            ("::ffff:7f00:2", "127.0.0.2"),
        ];
        for (given, kept) in table {
            assert_eq!(check_ip("ip", given).unwrap(), kept, "{given}");
        }
        assert!(matches!(
            check_ip("ip", "2001:db8::1"),
            Ok(Cow::Borrowed(_))
        ));
        assert!(check_ip("ip", "fe80::1%eth0").is_err());
        assert!(check_ip("ip", "[::1]").is_err());
    }

    #[test]
    fn registrations_keep_the_normal_address() {
        let mut reg = Registration {
            ip: "0:0:0:0:0:0:0:1".into(),
            port: 80,
            cluster: DEFAULT_CLUSTER.into(),
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            metadata: Metadata::new(),
            instance_id: None,
            client: None,
            owner: None,
        };
        registration(&mut reg, Origin::Grpc, 100).unwrap();
        assert_eq!(reg.ip, "::1");
        reg.ip = "01.02.03.004".into();
        let e = registration(&mut reg, Origin::Grpc, 100).unwrap_err();
        assert_eq!(e.field, "instance.ip");
    }

    #[test]
    fn http_health_checks_make_one_clean_request() {
        let http = |path: &str, headers: &str| HealthChecker::Http {
            path: path.into(),
            headers: headers.into(),
            expected_code: 200,
        };
        for ok in [
            http("/health", ""),
            http("", ""),
            http("/a?b=c&d=%0D%0A", "X-Probe: 1|Host:svc.local| |Accept: */*"),
            HealthChecker::Tcp,
            HealthChecker::None,
        ] {
            check_health_checker(&ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        let table = [
            (http("/a\r\nX-Evil: 1", ""), "healthChecker.path"),
            (http("/a b", ""), "healthChecker.path"),
            (http("health", ""), "healthChecker.path"),
            (http("/\u{e9}", ""), "healthChecker.path"),
            (
                http(&format!("/{}", "a".repeat(MAX_CHECK_PATH)), ""),
                "healthChecker.path",
            ),
            (http("/", "X-A: 1\r\nX-Evil: 2"), "healthChecker.headers"),
            (
                http("/", "X-A: 1\n\nGET / HTTP/1.1"),
                "healthChecker.headers",
            ),
            (http("/", "X\rA: 1"), "healthChecker.headers"),
            (http("/", "Bad Name: 1"), "healthChecker.headers"),
            (http("/", "novalue"), "healthChecker.headers"),
            (http("/", "Content-Length: 5"), "healthChecker.headers"),
            (
                http("/", "transfer-encoding: chunked"),
                "healthChecker.headers",
            ),
            (http("/", &"X-A: 1|".repeat(400)), "healthChecker.headers"),
            (
                HealthChecker::Http {
                    path: "/".into(),
                    headers: String::new(),
                    expected_code: 42,
                },
                "healthChecker.expectedResponseCode",
            ),
        ];
        for (checker, field) in table {
            let e = check_health_checker(&checker).unwrap_err();
            assert_eq!(e.field, field, "{checker:?}: {e}");
            assert!(
                !e.message.contains('\r') && !e.message.contains('\n'),
                "{e}"
            );
        }
        assert_eq!(
            health_check_headers(" X-A : 1 | Host:h ").unwrap(),
            [("X-A", "1"), ("Host", "h")]
        );
    }

    mod fuzz {
        use proptest::prelude::*;

        use super::super::*;

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 2_000,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            /// Any text: no panic; what is accepted is kept in a form that is accepted
            /// again unchanged.
            #[test]
            fn addresses_are_checked_without_panics(ip in "\\PC{0,40}|[0-9.]{0,20}|[0-9a-fA-F:.]{0,45}") {
                if let Ok(kept) = check_ip("ip", &ip) {
                    prop_assert!(matches!(check_ip("ip", &kept), Ok(Cow::Borrowed(_))), "{ip} -> {kept}");
                }
            }

            /// Every IPv4 address is accepted as its dotted quad, and only so.
            #[test]
            fn ipv4_round_trips(octets in any::<[u8; 4]>(), pad in 0usize..4) {
                let ip = std::net::Ipv4Addr::from(octets);
                let text = ip.to_string();
                prop_assert!(matches!(check_ip("ip", &text), Ok(Cow::Borrowed(_))));
                // A leading zero on any part is refused.
                let padded: Vec<String> = octets
                    .iter()
                    .enumerate()
                    .map(|(i, o)| if i == pad { format!("0{o}") } else { o.to_string() })
                    .collect();
                prop_assert!(check_ip("ip", &padded.join(".")).is_err());
            }

            /// Every spelling of an IPv6 address is kept as one string.
            #[test]
            fn ipv6_spellings_agree(segments in any::<[u16; 8]>()) {
                let ip = std::net::Ipv6Addr::from(segments);
                let full = segments.iter().map(|s| format!("{s:X}")).collect::<Vec<_>>().join(":");
                let kept = check_ip("ip", &ip.to_string()).unwrap().into_owned();
                prop_assert_eq!(check_ip("ip", &full).unwrap(), kept.clone());
                let lower = full.to_lowercase();
                prop_assert_eq!(check_ip("ip", &lower).unwrap(), kept);
            }
        }
    }
    #[test]
    fn metadata_forms_and_limits() {
        let m = parse_metadata("metadata", r#"{"a":"x","n":1,"b":true}"#, 100).unwrap();
        assert_eq!(m["n"], "1");
        assert_eq!(m["b"], "true");
        let m = parse_metadata("metadata", "k1=v1,k2=v2", 100).unwrap();
        assert_eq!(m["k2"], "v2");
        assert_eq!(
            parse_metadata("metadata", "a=b=c", 100)
                .unwrap_err()
                .message,
            "metadata format incorrect:a=b=c"
        );
        assert!(parse_metadata("metadata", "{bad json", 100)
            .unwrap_err()
            .message
            .contains("JSON"));
        assert!(parse_metadata("metadata", "k=0123456789", 5)
            .unwrap_err()
            .message
            .contains("exceed 5"));
        let bad_beat = r#"{"preserved.heart.beat.interval":"20000"}"#;
        assert!(parse_metadata("metadata", bad_beat, 1000)
            .unwrap_err()
            .message
            .contains("heart beat interval"));
    }

    fn reg(ip: &str) -> Registration {
        Registration {
            ip: ip.into(),
            port: 8080,
            cluster: "DEFAULT".into(),
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            metadata: Default::default(),
            instance_id: None,
            client: None,
            owner: None,
        }
    }

    const FACES: [Origin; 3] = [Origin::Http, Origin::Grpc, Origin::Import];

    #[test]
    fn every_face_refuses_a_bad_address_in_its_own_field_name() {
        let refusal = |face| registration(&mut reg("999.1.1.1"), face, 1024).unwrap_err();
        let message = |field: &str| {
            format!("Param '{field}' is illegal, '999.1.1.1' is not an IPv4 address: four decimal numbers from 0 to 255, without leading zeros.")
        };
        assert_eq!(refusal(Origin::Http).message, message("ip"));
        assert_eq!(refusal(Origin::Grpc).message, message("instance.ip"));
        assert_eq!(refusal(Origin::Import).message, message("ip"));
    }

    #[test]
    fn clusters_and_metadata_are_checked_alike_everywhere() {
        for face in FACES {
            let mut bad_cluster = reg("10.0.0.1");
            bad_cluster.cluster = "a_b".into();
            let refusal = registration(&mut bad_cluster, face, 1024).unwrap_err();
            assert_eq!(refusal.field, "clusterName", "{face:?}");

            let mut big = reg("10.0.0.1");
            big.metadata.insert("k".into(), "v".repeat(64));
            let refusal = registration(&mut big, face, 16).unwrap_err();
            assert_eq!(refusal.problem, Problem::Metadata, "{face:?}");
        }
        let mut big = reg("10.0.0.1");
        big.metadata.insert("k".into(), "v".repeat(64));
        let field = |face| registration(&mut big.clone(), face, 16).unwrap_err().field;
        assert_eq!(field(Origin::Http), "metadata");
        assert_eq!(field(Origin::Grpc), "instance.metadata");
    }

    #[test]
    fn registrations_are_kept_in_normal_form_and_imports_as_the_source_gives_them() {
        for face in [Origin::Http, Origin::Grpc] {
            let mut mapped = reg("::ffff:10.0.0.1");
            registration(&mut mapped, face, 1024).unwrap();
            assert_eq!(mapped.ip, "10.0.0.1");
        }
        let mut imported = reg("::ffff:10.0.0.1");
        registration(&mut imported, Origin::Import, 1024).unwrap();
        assert_eq!(imported.ip, "::ffff:10.0.0.1");
    }

    #[test]
    fn weights_are_checked_except_on_imports() {
        let mut heavy = reg("10.0.0.1");
        heavy.weight = 20_000.0;
        for face in [Origin::Http, Origin::Grpc] {
            let refusal = registration(&mut heavy.clone(), face, 1024).unwrap_err();
            assert_eq!(refusal.problem, Problem::Weight);
        }
        registration(&mut heavy, Origin::Import, 1024).unwrap();
    }
}
