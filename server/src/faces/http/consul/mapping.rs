//! How a Consul service registration is held as a roster instance, and how any instance
//! is shown back in Consul's shapes: pure functions over JSON and metadata, no I/O.
//!
//! - the service's `Name` is the roster service (as it is: Consul names are
//!   case-sensitive), `Address` the IP (the caller's when empty, as an agent uses its
//!   node's), `Port` the port, `Weights.Passing` the weight (default 1);
//! - `Meta` is metadata, and so is every `key=value` tag (Meta wins), which is how the
//!   Consul sync source imports tags; the tags themselves, the service id and the check
//!   are `consul.*` keys, hidden from the `Meta` this face shows;
//! - a service with a **TTL check** is an ephemeral instance kept by the check's passes
//!   (a pass is a beat): the TTL is the beat timeout, `DeregisterCriticalServiceAfter`
//!   (else a day) past it the delete timeout. Its status is kept (`consul.status`, the
//!   TTL check's `critical` until the first pass, as Consul starts it): a critical check
//!   takes the instance out of consumers' lists by `enabled` (an ephemeral instance's
//!   health is its beats'), and a TTL that lapses makes it unhealthy, shown `critical`;
//! - a service with an **HTTP or TCP check**, or none, is a persistent instance (held in
//!   Raft, as an agent keeps its services across restarts); the leader runs its check
//!   (`consul.check.*`, `health::check`) and its health is the check's; without a check
//!   it is always passing;
//! - a Consul node is an address: each instance IP is a node of that name.

use serde_json::{Map, Value};

use crate::error::Error;
use crate::services::health::check::{self, http_target, tcp_target};
use roster_registry::instance::{
    Lookup, Metadata, BEAT_INTERVAL_KEY, BEAT_TIMEOUT_KEY, DELETE_TIMEOUT_KEY,
};
use roster_registry::validate::{check_ip, check_service_name, DEFAULT_CLUSTER};
use roster_registry::Registration;

/// Prefix of the metadata keys this face keeps for itself.
pub const PREFIX: &str = "consul.";
/// The service id.
pub const ID: &str = "consul.id";
/// The tags, a JSON array.
pub const TAGS: &str = "consul.tags";
/// The check's kind: `ttl`, `http`, `tcp` or `none` (the health checker reads it).
pub const CHECK: &str = check::OWN_CHECK_KEY;
/// The check's id.
pub const CHECK_ID: &str = "consul.check.id";
/// The check's name.
pub const CHECK_NAME: &str = "consul.check.name";
/// What an HTTP check gets (a URL) or a TCP check connects to (`host:port`).
pub const CHECK_TARGET: &str = check::OWN_CHECK_TARGET_KEY;
/// The check's interval as given (shown; roster's checker runs on its own interval).
pub const CHECK_INTERVAL: &str = "consul.check.interval";
/// A TTL check's status as last reported (`passing`, `warning`, `critical`).
pub const STATUS: &str = "consul.status";
/// A TTL check's output (or note) as last reported.
pub const OUTPUT: &str = "consul.output";
/// The reason given when the service was put in maintenance (present: it is).
pub const MAINTENANCE: &str = "consul.maintenance";

/// The longest TTL or deregistration delay taken (a day): a longer one would keep a
/// dead instance.
const MAX_MS: u64 = 86_400_000;
/// Who is removed after how long critical when the registration does not say: a day.
const DEFAULT_DELETE_MS: u64 = 86_400_000;
/// The shortest TTL taken: one second.
const MIN_TTL_MS: u64 = 1_000;

/// A check's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Passing.
    Passing,
    /// Warning: listed, not `passing`.
    Warning,
    /// Critical.
    Critical,
}

impl Status {
    /// The status named `text`; `None` for another word.
    pub fn parse(text: &str) -> Option<Status> {
        match text {
            "passing" => Some(Status::Passing),
            "warning" => Some(Status::Warning),
            "critical" => Some(Status::Critical),
            _ => None,
        }
    }

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passing => "passing",
            Status::Warning => "warning",
            Status::Critical => "critical",
        }
    }
}

/// The check kinds roster runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Kept by the client's passes.
    Ttl,
    /// A GET expecting 2xx, by the leader.
    Http,
    /// A connect, by the leader.
    Tcp,
    /// None: always passing.
    None,
}

impl Kind {
    /// Its name in `consul.check`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Ttl => "ttl",
            Kind::Http => "http",
            Kind::Tcp => "tcp",
            Kind::None => "none",
        }
    }

    /// The kind an instance's metadata names (`None` for an instance that another face
    /// registered).
    pub fn of(metadata: &impl Lookup) -> Option<Kind> {
        Some(match metadata.lookup(CHECK)? {
            "ttl" => Kind::Ttl,
            "http" => Kind::Http,
            "tcp" => Kind::Tcp,
            _ => Kind::None,
        })
    }
}

/// Parses a Go duration (`"10s"`, `"1m30s"`, `"500ms"`, `"1.5h"`; a bare number is
/// nanoseconds, as Go's JSON decoding of `time.Duration` takes it) into milliseconds.
pub fn duration_ms(value: &Value, field: &str) -> Result<u64, Error> {
    let bad = |text: &str| Error::illegal(field, format!("'{text}' is not a duration."));
    let text = match value {
        Value::Number(n) => {
            let nanos = n.as_u64().ok_or_else(|| bad(&n.to_string()))?;
            return Ok(nanos / 1_000_000);
        }
        Value::String(s) => s.trim(),
        other => return Err(bad(&other.to_string())),
    };
    if text.is_empty() || text == "0" {
        return Ok(0);
    }
    let mut total = 0f64;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| bad(text))?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad(text))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3600e3,
            _ => return Err(bad(text)),
        };
        total += number * scale;
        rest = &rest[unit_len..];
    }
    if !total.is_finite() || total > u64::MAX as f64 / 2.0 {
        return Err(bad(text));
    }
    Ok(total as u64)
}

/// A registration read from a `PUT /v1/agent/service/register` body.
#[derive(Debug)]
pub struct Registered {
    /// The service's name (the roster service).
    pub name: String,
    /// The service id.
    pub id: String,
    /// The check's kind.
    pub kind: Kind,
    /// The instance as roster registers it.
    pub registration: Registration,
}

/// `value` as text when it is a string (trimmed, non-empty).
fn text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        _ => None,
    }
}

/// A field's value when present and not null. Keys are matched as Consul's agent
/// decodes them: exactly, else ignoring case and underscores (`name`, `Name`,
/// `deregister_critical_service_after` — `py-consul` sends lower-case keys).
pub fn field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    let found = object.get(key).or_else(|| {
        let fold = |k: &str| -> String {
            k.chars()
                .filter(|c| *c != '_')
                .map(|c| c.to_ascii_lowercase())
                .collect()
        };
        let wanted = fold(key);
        object
            .iter()
            .find(|(k, _)| fold(k) == wanted)
            .map(|(_, v)| v)
    });
    found.filter(|v| !v.is_null())
}

/// A string field: `Err` naming it when it is there and not a string.
fn string(object: &Map<String, Value>, key: &str, path: &str) -> Result<Option<String>, Error> {
    match field(object, key) {
        None => Ok(None),
        Some(value @ Value::String(_)) => Ok(text(Some(value))),
        Some(_) => Err(Error::illegal(path, "it should be a string.")),
    }
}

/// A check object of a registration, and the field it is at (`Check`, `Checks[1]`).
type Chosen<'a> = (String, &'a Map<String, Value>);

/// The check of a registration: `Check`, else the first TTL check of `Checks`, else
/// its first HTTP or TCP check. `Ok(None)`: no check. Also its default id's suffix.
fn chosen_check(body: &Map<String, Value>) -> Result<Option<Chosen<'_>>, Error> {
    if let Some(check) = field(body, "Check") {
        let Value::Object(check) = check else {
            return Err(Error::illegal("Check", "it should be an object."));
        };
        return Ok(Some(("Check".to_string(), check)));
    }
    let Some(checks) = field(body, "Checks") else {
        return Ok(None);
    };
    let Value::Array(checks) = checks else {
        return Err(Error::illegal("Checks", "it should be an array."));
    };
    let mut objects = Vec::new();
    for (i, check) in checks.iter().enumerate() {
        let Value::Object(check) = check else {
            return Err(Error::illegal(
                &format!("Checks[{i}]"),
                "it should be an object.",
            ));
        };
        objects.push((format!("Checks[{i}]"), check));
    }
    let ttl = objects.iter().position(|(_, c)| field(c, "TTL").is_some());
    Ok(ttl
        .or((!objects.is_empty()).then_some(0))
        .map(|i| objects.swap_remove(i)))
}

/// The check fields roster does not run: a registration naming one is refused.
const UNSUPPORTED_CHECKS: &[&str] = &[
    "Args",
    "ScriptArgs",
    "Script",
    "GRPC",
    "H2PING",
    "DockerContainerID",
    "AliasService",
    "AliasNode",
    "UDP",
    "OSService",
];

/// Reads a registration body; `caller_ip` stands for an empty `Address`. 400 naming the
/// field for anything roster cannot hold as the client means it.
pub fn registered(body: &[u8], caller_ip: Option<&str>) -> Result<Registered, Error> {
    let document: Value = serde_json::from_slice(body)
        .map_err(|e| Error::illegal("body", format!("Request decode failed: {e}.")))?;
    let Value::Object(body) = document else {
        return Err(Error::illegal("body", "it should be a JSON object."));
    };
    let name = string(&body, "Name", "Name")?.ok_or_else(|| Error::missing("Name"))?;
    check_service_name(&name).map_err(|_| {
        Error::illegal(
            "Name",
            "it should be 1 to 512 characters, without whitespace, '@@' or a leading '@'.",
        )
    })?;
    if string(&body, "Kind", "Kind")?.is_some() {
        return Err(Error::illegal(
            "Kind",
            "roster serves plain services only (no Connect proxies or gateways).",
        ));
    }
    let id = string(&body, "ID", "ID")?.unwrap_or_else(|| name.clone());
    if id.len() > 256 || id.contains('/') {
        return Err(Error::illegal(
            "ID",
            "it should be at most 256 characters, without '/'.",
        ));
    }
    let address = match string(&body, "Address", "Address")? {
        Some(a) => a,
        None => caller_ip
            .map(str::to_string)
            .ok_or_else(|| Error::missing("Address"))?,
    };
    let ip = check_ip("Address", &address)?.into_owned();
    let port = match field(&body, "Port") {
        None => 0,
        Some(p) => p
            .as_u64()
            .and_then(|p| u16::try_from(p).ok())
            .ok_or_else(|| Error::illegal("Port", "the value should be between 0 and 65535."))?,
    };
    let tags: Vec<String> = match field(&body, "Tags") {
        None => Vec::new(),
        Some(Value::Array(tags)) => tags
            .iter()
            .map(|t| t.as_str().map(str::to_string))
            .collect::<Option<_>>()
            .ok_or_else(|| Error::illegal("Tags", "every tag should be a string."))?,
        Some(_) => return Err(Error::illegal("Tags", "it should be an array of strings.")),
    };
    let mut metadata = Metadata::new();
    for tag in &tags {
        if let Some((k, v)) = tag.split_once('=') {
            if !k.is_empty() && !k.starts_with(PREFIX) && !k.starts_with("preserved.") {
                metadata.insert(k.to_string(), v.to_string());
            }
        }
    }
    match field(&body, "Meta") {
        None => {}
        Some(Value::Object(meta)) => {
            for (k, v) in meta {
                let Some(v) = v.as_str() else {
                    return Err(Error::illegal(
                        &format!("Meta.{k}"),
                        "it should be a string.",
                    ));
                };
                if k.starts_with(PREFIX) || k.starts_with("preserved.") {
                    return Err(Error::illegal(&format!("Meta.{k}"), "the key is reserved."));
                }
                metadata.insert(k.clone(), v.to_string());
            }
        }
        Some(_) => return Err(Error::illegal("Meta", "it should be an object.")),
    }
    let weights = field(&body, "Weights").and_then(Value::as_object);
    let weight = match weights.and_then(|w| field(w, "Passing")) {
        None | Some(Value::Null) => 1.0,
        Some(w) => w
            .as_f64()
            .filter(|w| (0.0..=10_000.0).contains(w))
            .ok_or_else(|| {
                Error::illegal(
                    "Weights.Passing",
                    "the value should be between 0 and 10000.",
                )
            })?,
    };
    let put = |metadata: &mut Metadata, key: &str, value: String| {
        metadata.insert(key.to_string(), value);
    };
    put(&mut metadata, ID, id.clone());
    if !tags.is_empty() {
        put(&mut metadata, TAGS, Value::from(tags.clone()).to_string());
    }
    let check = chosen_check(&body)?;
    let mut kind = Kind::None;
    let mut enabled = true;
    if let Some((path, check)) = check {
        let at = |key: &str| format!("{path}.{key}");
        if let Some(bad) = UNSUPPORTED_CHECKS
            .iter()
            .find(|k| field(check, k).is_some())
        {
            return Err(Error::illegal(
                &at(bad),
                "roster runs TTL, HTTP and TCP checks only.",
            ));
        }
        let check_id = string(check, "CheckID", &at("CheckID"))?
            .or(string(check, "ID", &at("ID"))?)
            .unwrap_or_else(|| match path.as_str() {
                "Check" => format!("service:{id}"),
                _ => {
                    let n = path
                        .trim_start_matches("Checks[")
                        .trim_end_matches(']')
                        .parse::<usize>()
                        .unwrap_or(0);
                    format!("service:{id}:{}", n + 1)
                }
            });
        let check_name = string(check, "Name", &at("Name"))?
            .unwrap_or_else(|| format!("Service '{name}' check"));
        put(&mut metadata, CHECK_ID, check_id);
        put(&mut metadata, CHECK_NAME, check_name);
        if let Some(interval) = string(check, "Interval", &at("Interval"))? {
            duration_ms(&Value::from(interval.clone()), &at("Interval"))?;
            put(&mut metadata, CHECK_INTERVAL, interval);
        }
        let status = match string(check, "Status", &at("Status"))? {
            None => None,
            Some(s) => Some(Status::parse(&s).ok_or_else(|| {
                Error::illegal(
                    &at("Status"),
                    format!("'{s}' is not passing, warning or critical."),
                )
            })?),
        };
        if let Some(ttl) = field(check, "TTL") {
            let ttl_ms = duration_ms(ttl, &at("TTL"))?;
            if !(MIN_TTL_MS..=MAX_MS).contains(&ttl_ms) {
                return Err(Error::illegal(
                    &at("TTL"),
                    "it should be between 1s and 24h.",
                ));
            }
            let after = match field(check, "DeregisterCriticalServiceAfter") {
                None => DEFAULT_DELETE_MS,
                Some(d) => match duration_ms(d, &at("DeregisterCriticalServiceAfter"))? {
                    0 => DEFAULT_DELETE_MS,
                    d if d <= MAX_MS => d,
                    _ => {
                        return Err(Error::illegal(
                            &at("DeregisterCriticalServiceAfter"),
                            "it should be at most 24h.",
                        ))
                    }
                },
            };
            kind = Kind::Ttl;
            // Consul starts a TTL check critical: listed, not passing, until a pass.
            let status = status.unwrap_or(Status::Critical);
            enabled = status != Status::Critical;
            put(&mut metadata, STATUS, status.as_str().to_string());
            put(
                &mut metadata,
                BEAT_INTERVAL_KEY,
                (ttl_ms / 2).max(500).to_string(),
            );
            put(&mut metadata, BEAT_TIMEOUT_KEY, ttl_ms.to_string());
            put(
                &mut metadata,
                DELETE_TIMEOUT_KEY,
                (ttl_ms + after).to_string(),
            );
        } else if let Some(url) = string(check, "HTTP", &at("HTTP"))? {
            http_target(&url).map_err(|problem| Error::illegal(&at("HTTP"), problem))?;
            kind = Kind::Http;
            put(&mut metadata, CHECK_TARGET, url);
        } else if let Some(target) = string(check, "TCP", &at("TCP"))? {
            tcp_target(&target).map_err(|problem| Error::illegal(&at("TCP"), problem))?;
            kind = Kind::Tcp;
            put(&mut metadata, CHECK_TARGET, target);
        } else {
            return Err(Error::illegal(
                &path,
                "a check needs one of TTL, HTTP or TCP.",
            ));
        }
    }
    put(&mut metadata, CHECK, kind.as_str().to_string());
    Ok(Registered {
        name,
        id,
        kind,
        registration: Registration {
            ip,
            port,
            cluster: DEFAULT_CLUSTER.to_string(),
            weight,
            healthy: true,
            enabled,
            ephemeral: kind == Kind::Ttl,
            metadata,
            instance_id: None,
            client: None,
            owner: None,
        },
    })
}

/// Whether an instance with this metadata is served to consumers: not in maintenance
/// and its TTL check not critical.
pub fn enabled_for(metadata: &impl Lookup) -> bool {
    metadata.lookup(MAINTENANCE).is_none()
        && metadata.lookup(STATUS).and_then(Status::parse) != Some(Status::Critical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> Result<u64, Error> {
        duration_ms(&Value::from(text), "TTL")
    }

    #[test]
    fn go_durations_parse() {
        assert_eq!(ms("10s").unwrap(), 10_000);
        assert_eq!(ms("1m30s").unwrap(), 90_000);
        assert_eq!(ms("500ms").unwrap(), 500);
        assert_eq!(ms("1.5h").unwrap(), 5_400_000);
        assert_eq!(ms("").unwrap(), 0);
        assert_eq!(
            duration_ms(&Value::from(3_000_000_000u64), "TTL").unwrap(),
            3_000
        );
        for bad in ["abc", "10", "10x", "s", "1..5s"] {
            let e = ms(bad).unwrap_err();
            assert!(e.message.contains("TTL"), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn a_ttl_registration_is_an_ephemeral_instance_that_starts_critical() {
        let body = br#"{"Name":"web","ID":"web-1","Address":"127.0.0.1","Port":8080,
            "Tags":["v1","version=2"],"Meta":{"zone":"a"},"Weights":{"Passing":3},
            "Check":{"TTL":"3s","DeregisterCriticalServiceAfter":"1m"}}"#;
        let r = registered(body, None).unwrap();
        assert_eq!(
            (r.name.as_str(), r.id.as_str(), r.kind),
            ("web", "web-1", Kind::Ttl)
        );
        let reg = r.registration;
        assert!(reg.ephemeral && !reg.enabled);
        assert_eq!(
            (reg.ip.as_str(), reg.port, reg.weight),
            ("127.0.0.1", 8080, 3.0)
        );
        let m = &reg.metadata;
        assert_eq!(m.get("version").map(String::as_str), Some("2"));
        assert_eq!(m.get("zone").map(String::as_str), Some("a"));
        assert_eq!(m.get(CHECK_ID).map(String::as_str), Some("service:web-1"));
        assert_eq!(m.get(BEAT_TIMEOUT_KEY).map(String::as_str), Some("3000"));
        assert_eq!(m.get(DELETE_TIMEOUT_KEY).map(String::as_str), Some("63000"));
        assert_eq!(m.get(STATUS).map(String::as_str), Some("critical"));
    }

    #[test]
    fn http_tcp_and_checkless_registrations_are_persistent() {
        let http = br#"{"Name":"a","Port":1,"Check":{"HTTP":"http://127.0.0.1:9/health","Interval":"5s"}}"#;
        let r = registered(http, Some("127.0.0.9")).unwrap();
        assert_eq!(r.kind, Kind::Http);
        assert!(!r.registration.ephemeral && r.registration.enabled);
        assert_eq!(r.registration.ip, "127.0.0.9");
        let tcp = br#"{"Name":"a","Port":1,"Checks":[{"TCP":"127.0.0.1:9"}]}"#;
        let r = registered(tcp, Some("127.0.0.1")).unwrap();
        assert_eq!(r.kind, Kind::Tcp);
        assert_eq!(
            r.registration.metadata.get(CHECK_ID).map(String::as_str),
            Some("service:a:1")
        );
        let none = br#"{"Name":"a","Port":1}"#;
        assert_eq!(
            registered(none, Some("127.0.0.1")).unwrap().kind,
            Kind::None
        );
    }

    #[test]
    fn keys_are_taken_whatever_their_case_as_consul_decodes_them() {
        // py-consul's body.
        let body = br#"{"name":"a","id":"a-1","address":"127.0.0.1","port":8080,
            "tags":["x=1"],"meta":{"Zone":"b"},"weights":{"passing":2},
            "checks":[{"http":"http://127.0.0.1:9/h","interval":"1s","timeout":"1s",
            "deregister_critical_service_after":"1m"}]}"#;
        let r = registered(body, None).unwrap();
        assert_eq!(
            (r.name.as_str(), r.id.as_str(), r.kind),
            ("a", "a-1", Kind::Http)
        );
        let reg = r.registration;
        assert_eq!((reg.port, reg.weight), (8080, 2.0));
        // Meta's own keys keep their case.
        assert_eq!(reg.metadata.get("Zone").map(String::as_str), Some("b"));
        assert_eq!(reg.metadata.get("x").map(String::as_str), Some("1"));
        let ttl = br#"{"Name":"t","check":{"ttl":"5s","status":"passing"}}"#;
        let r = registered(ttl, Some("127.0.0.1")).unwrap();
        assert_eq!(r.kind, Kind::Ttl);
        assert!(r.registration.enabled);
    }

    #[test]
    fn bad_registrations_name_their_field() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{"Port":1}"#, "Name"),
            (br#"{"Name":"a","Port":70000}"#, "Port"),
            (br#"{"Name":"a","Check":{"TTL":"abc"}}"#, "Check.TTL"),
            (
                br#"{"Name":"a","Check":{"Args":["x"],"Interval":"1s"}}"#,
                "Check.Args",
            ),
            (
                br#"{"Name":"a","Check":{"HTTP":"https://x/"}}"#,
                "Check.HTTP",
            ),
            (br#"{"Name":"a","Check":{"Interval":"1s"}}"#, "Check"),
            (br#"{"Name":"a","Tags":"x"}"#, "Tags"),
            (
                br#"{"Name":"a","Meta":{"consul.id":"x"}}"#,
                "Meta.consul.id",
            ),
            (br#"{"Name":"a","Kind":"connect-proxy"}"#, "Kind"),
            (br#"{"Name":"a","Address":"not an ip!"}"#, "Address"),
            (br#"[1]"#, "body"),
        ];
        for (body, field) in cases {
            let e = registered(body, Some("127.0.0.1")).unwrap_err();
            assert!(e.message.contains(field), "{field}: {}", e.message);
        }
    }

    #[test]
    fn check_targets_parse() {
        assert_eq!(
            http_target("http://127.0.0.1:8080/actuator/health?x=1").unwrap(),
            ("127.0.0.1".into(), 8080, "/actuator/health?x=1".into())
        );
        assert_eq!(
            http_target("http://host").unwrap(),
            ("host".into(), 80, "/".into())
        );
        assert!(http_target("http://a b/").is_err());
        assert!(http_target("http://a/x\r\nHost: b").is_err());
        assert_eq!(tcp_target("[::1]:22").unwrap(), ("::1".into(), 22));
        assert!(tcp_target("host").is_err());
    }
}
