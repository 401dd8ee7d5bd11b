//! How a Eureka instance is held as a roster instance, and shown back: pure functions
//! over JSON and metadata, no I/O.
//!
//! - the application name is the service's, lower-cased (`ORDER-SERVICE` is held as
//!   `order-service`, as the Eureka sync source imports it), and a service is shown
//!   as the application of its upper-cased name;
//! - the address is `ipAddr` and `port.$` (`securePort.$` when only that is enabled);
//!   the cluster `metadata.zone` when it is a valid cluster name, else `DEFAULT`; the
//!   weight `metadata.weight` when numeric, else 1 (as the sync source);
//! - `leaseInfo.renewalIntervalInSecs` is the beat interval, `durationInSecs` the delete
//!   timeout (unhealthy after the smaller of three intervals and the duration), in the
//!   `preserved.*` keys every face reads;
//! - the status is kept (`eureka.status`, and an operator's override in
//!   `eureka.overriddenStatus`); the instance is enabled only while the status in effect
//!   is `UP` — an ephemeral instance's health is its beats', so DOWN, STARTING and
//!   OUT_OF_SERVICE take it out of consumers' lists by `enabled`;
//! - the instance id and the fields roster has no place for are `eureka.*` metadata,
//!   hidden from the metadata the Eureka API shows.

use serde_json::{json, Map, Value};

use crate::error::Error;
use roster_registry::instance::{
    Instance, Lookup, Metadata, BEAT_INTERVAL_KEY, BEAT_TIMEOUT_KEY, DELETE_TIMEOUT_KEY,
};
use roster_registry::validate::{check_ip, check_port, DEFAULT_CLUSTER};
use roster_registry::Registration;

/// Prefix of the metadata keys this face keeps for itself.
pub const PREFIX: &str = "eureka.";
/// The Eureka instance id.
pub const INSTANCE_ID: &str = "eureka.instanceId";
/// The application name as the client gave it.
pub const APP: &str = "eureka.app";
/// `hostName`.
pub const HOST_NAME: &str = "eureka.hostName";
/// The status the client reports.
pub const STATUS: &str = "eureka.status";
/// An operator's status override (`PUT .../status`).
pub const OVERRIDDEN: &str = "eureka.overriddenStatus";
/// `vipAddress`.
pub const VIP: &str = "eureka.vipAddress";
/// `secureVipAddress`.
pub const SVIP: &str = "eureka.secureVipAddress";
/// `port.@enabled`.
pub const PORT_ENABLED: &str = "eureka.portEnabled";
/// `securePort.$`.
pub const SECURE_PORT: &str = "eureka.securePort";
/// `securePort.@enabled`.
pub const SECURE_PORT_ENABLED: &str = "eureka.securePortEnabled";
/// `homePageUrl`.
pub const HOME_PAGE: &str = "eureka.homePageUrl";
/// `statusPageUrl`.
pub const STATUS_PAGE: &str = "eureka.statusPageUrl";
/// `healthCheckUrl`.
pub const HEALTH_CHECK: &str = "eureka.healthCheckUrl";
/// `countryId`.
pub const COUNTRY: &str = "eureka.countryId";
/// `dataCenterInfo.name`.
pub const DATA_CENTER: &str = "eureka.dataCenter";
/// `lastDirtyTimestamp`: a renewal naming a later one asks the client to register again.
pub const DIRTY: &str = "eureka.lastDirtyTimestamp";
/// When the instance was first registered, ms.
pub const REGISTERED: &str = "eureka.registrationTimestamp";

/// Eureka's lease defaults, seconds.
const DEFAULT_RENEWAL_SECS: u64 = 30;
const DEFAULT_DURATION_SECS: u64 = 90;
/// The longest lease taken, seconds (a day): a longer one would keep a dead instance.
const MAX_LEASE_SECS: u64 = 86_400;
/// Eureka's only data center class roster shows.
const DATA_CENTER_CLASS: &str = "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo";

/// An instance status of Eureka's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Serving.
    Up,
    /// Reported down by the client.
    Down,
    /// Starting, not serving yet.
    Starting,
    /// Taken out of service (usually by an operator's override).
    OutOfService,
    /// Unknown (an override of `UNKNOWN` is none).
    Unknown,
}

impl Status {
    /// The status named `text` (any case); `None` for another word.
    pub fn parse(text: &str) -> Option<Status> {
        Some(match text.trim().to_ascii_uppercase().as_str() {
            "UP" => Status::Up,
            "DOWN" => Status::Down,
            "STARTING" => Status::Starting,
            "OUT_OF_SERVICE" => Status::OutOfService,
            "UNKNOWN" => Status::Unknown,
            _ => return None,
        })
    }

    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Up => "UP",
            Status::Down => "DOWN",
            Status::Starting => "STARTING",
            Status::OutOfService => "OUT_OF_SERVICE",
            Status::Unknown => "UNKNOWN",
        }
    }
}

/// The service an application is held as: its name lower-cased.
pub fn service_of(app: &str) -> String {
    app.to_lowercase()
}

/// The application a service is shown as: its name upper-cased.
pub fn app_of(service: &str) -> String {
    service.to_uppercase()
}

/// The status in effect: an override (but `UNKNOWN`) over the client's own.
pub fn effective(metadata: &impl Lookup) -> Status {
    let read = |key| metadata.lookup(key).and_then(Status::parse);
    match read(OVERRIDDEN) {
        Some(s) if s != Status::Unknown => s,
        _ => read(STATUS).unwrap_or(Status::Up),
    }
}

/// Whether an instance whose status in effect is `status` is served to consumers.
pub fn enabled_for(status: Status) -> bool {
    status == Status::Up
}

/// The status the Eureka API shows for an instance: the one in effect for one a Eureka
/// client registered, else from its flags; a silent (unhealthy) one is `DOWN`, a
/// disabled one `OUT_OF_SERVICE` when it would otherwise be `UP`.
pub fn shown_status(metadata: &impl Lookup, healthy: bool, enabled: bool) -> Status {
    let status = if metadata.lookup(STATUS).is_some() {
        effective(metadata)
    } else {
        Status::Up
    };
    match status {
        Status::Up if !healthy => Status::Down,
        Status::Up if !enabled => Status::OutOfService,
        s => s,
    }
}

pub use roster_sync::eureka::hashcode;

/// A registration read from a `POST /eureka/apps/{APP}` body.
#[derive(Debug)]
pub struct Registered {
    /// The Eureka instance id.
    pub id: String,
    /// The instance as roster registers it (metadata with the `eureka.*` and
    /// `preserved.*` keys; `enabled` from the client's status).
    pub registration: Registration,
}

/// `value` as text: a string as it is, a number or a boolean written out.
fn text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A non-negative integer given as a number or as text; `Err` names `field`.
fn integer(value: Option<&Value>, field: &str) -> Result<Option<i64>, Error> {
    match text(value) {
        None => Ok(None),
        Some(t) => t
            .parse::<i64>()
            .map(Some)
            .map_err(|_| Error::illegal(field, format!("'{t}' is not an integer."))),
    }
}

/// A port object (`{"$": 8080, "@enabled": "true"}`, or a bare number): the port and
/// whether it is enabled (`enabled_default` when unsaid).
fn port(
    value: Option<&Value>,
    field: &str,
    enabled_default: bool,
) -> Result<Option<(u16, bool)>, Error> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let (number, enabled) = match value {
        Value::Object(o) => (o.get("$"), text(o.get("@enabled"))),
        other => (Some(other), None),
    };
    let Some(n) = integer(number, field)? else {
        return Err(Error::missing(&format!("{field}.$")));
    };
    let enabled = enabled.map_or(enabled_default, |e| e.eq_ignore_ascii_case("true"));
    Ok(Some((check_port(field, n)?, enabled)))
}

/// A lease time in seconds, 1 to a day; `default` when unsaid.
fn lease_secs(lease: Option<&Value>, key: &str, default: u64) -> Result<u64, Error> {
    let field = format!("instance.leaseInfo.{key}");
    match integer(lease.and_then(|l| l.get(key)), &field)? {
        None | Some(0) => Ok(default),
        Some(n) if n > 0 && n as u64 <= MAX_LEASE_SECS => Ok(n as u64),
        Some(n) => Err(Error::illegal(
            &field,
            format!("{n} is not between 1 and {MAX_LEASE_SECS}."),
        )),
    }
}

/// Reads a registration body for application `app` (the path's): 400 naming the field
/// for a body without `instance`, without `ipAddr` or with a bad one, an `app` other
/// than the path's, no usable port, a status or lease that is no such thing.
pub fn registered(app: &str, body: &[u8]) -> Result<Registered, Error> {
    let document: Value = serde_json::from_slice(body)
        .map_err(|e| Error::illegal("body", format!("it is not valid JSON: {e}.")))?;
    let Some(Value::Object(instance)) = document.get("instance") else {
        return Err(Error::missing("instance"));
    };
    let field = |key: &str| text(instance.get(key));
    if let Some(given) = field("app") {
        if !given.eq_ignore_ascii_case(app) {
            return Err(Error::illegal(
                "instance.app",
                format!("'{given}' is not the application '{app}' of the path."),
            ));
        }
    }
    let raw_ip = field("ipAddr").ok_or_else(|| Error::missing("instance.ipAddr"))?;
    let ip = check_ip("instance.ipAddr", &raw_ip)?.into_owned();
    let plain = port(instance.get("port"), "instance.port", true)?;
    let secure = port(instance.get("securePort"), "instance.securePort", false)?;
    let port = match (plain, secure) {
        (Some((p, true)), _) => p,
        (_, Some((p, true))) => p,
        (Some((p, false)), _) => p,
        _ => return Err(Error::missing("instance.port")),
    };
    let status = match field("status") {
        None => Status::Up,
        Some(s) => Status::parse(&s).ok_or_else(|| {
            Error::illegal("instance.status", format!("'{s}' is no Eureka status."))
        })?,
    };
    let lease = instance.get("leaseInfo");
    let renewal = lease_secs(lease, "renewalIntervalInSecs", DEFAULT_RENEWAL_SECS)?;
    let duration = lease_secs(lease, "durationInSecs", DEFAULT_DURATION_SECS)?;
    let host = field("hostName").unwrap_or_else(|| ip.clone());
    // Eureka's id: `instanceId`, else the host name (its legacy form).
    let id = field("instanceId").unwrap_or_else(|| host.clone());

    let mut metadata = client_metadata(instance.get("metadata"));
    let cluster = metadata
        .get("zone")
        .filter(|z| !z.is_empty() && z.len() <= 64)
        .filter(|z| z.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
        .cloned()
        .unwrap_or_else(|| DEFAULT_CLUSTER.to_string());
    let weight = metadata
        .get("weight")
        .and_then(|w| w.trim().parse::<f64>().ok())
        .filter(|w| w.is_finite() && (0.0..=10_000.0).contains(w))
        .unwrap_or(1.0);
    let mut put = |key: &str, value: Option<String>| {
        if let Some(v) = value {
            metadata.insert(key.to_string(), v);
        }
    };
    put(INSTANCE_ID, Some(id.clone()));
    put(APP, Some(field("app").unwrap_or_else(|| app.to_string())));
    put(HOST_NAME, Some(host));
    put(STATUS, Some(status.as_str().to_string()));
    put(VIP, field("vipAddress"));
    put(SVIP, field("secureVipAddress"));
    put(PORT_ENABLED, plain.map(|(_, e)| e.to_string()));
    put(SECURE_PORT, secure.map(|(p, _)| p.to_string()));
    put(SECURE_PORT_ENABLED, secure.map(|(_, e)| e.to_string()));
    put(HOME_PAGE, field("homePageUrl"));
    put(STATUS_PAGE, field("statusPageUrl"));
    put(HEALTH_CHECK, field("healthCheckUrl"));
    put(COUNTRY, field("countryId"));
    put(
        DATA_CENTER,
        text(instance.get("dataCenterInfo").and_then(|d| d.get("name"))),
    );
    put(DIRTY, field("lastDirtyTimestamp"));
    put(BEAT_INTERVAL_KEY, Some((renewal * 1000).to_string()));
    put(
        BEAT_TIMEOUT_KEY,
        Some((renewal.saturating_mul(3).min(duration) * 1000).to_string()),
    );
    put(DELETE_TIMEOUT_KEY, Some((duration * 1000).to_string()));
    Ok(Registered {
        id,
        registration: Registration {
            ip,
            port,
            cluster,
            weight,
            healthy: true,
            enabled: enabled_for(status),
            ephemeral: true,
            metadata,
            instance_id: None,
            client: None,
            owner: None,
        },
    })
}

/// The client's `metadata` map, values as text, without Jackson's `@class` and without
/// the keys this face keeps for itself.
fn client_metadata(value: Option<&Value>) -> Metadata {
    let Some(Value::Object(map)) = value else {
        return Metadata::new();
    };
    map.iter()
        .filter(|(k, _)| *k != "@class" && !k.starts_with(PREFIX))
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some((k.clone(), s.clone())),
            Value::Null => None,
            other => Some((k.clone(), other.to_string())),
        })
        .collect()
}

/// The Eureka id of an instance: the one its client gave, else `ip:port`.
pub fn id_of(instance: &Instance) -> String {
    match instance.metadata.get(INSTANCE_ID) {
        Some(id) => id.to_string(),
        None => instance.address.to_string(),
    }
}

/// The VIP addresses an instance answers to (`vipAddress`, else the service's name).
pub fn vips<'a>(
    instance: &'a Instance,
    key: &str,
    service: &'a str,
) -> impl Iterator<Item = &'a str> {
    instance
        .metadata
        .get(key)
        .unwrap_or(service)
        .split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// How an instance is shown: the fields of Eureka's `InstanceInfo` as its JSON codec
/// writes them. `app`: the application; `service`: the service's name;
/// `modified_ms`: when its service last changed; `action`: `ADDED` or `MODIFIED`.
pub fn instance_json(
    instance: &Instance,
    app: &str,
    service: &str,
    modified_ms: u64,
    action: &str,
) -> Value {
    let m = &instance.metadata;
    let get = |key: &str| m.get(key).map(str::to_string);
    let ip = instance.ip();
    let status = shown_status(m, instance.healthy, instance.enabled);
    let hb = instance.heartbeat();
    let registered: u64 = m.get(REGISTERED).and_then(|t| t.parse().ok()).unwrap_or(0);
    let renewed = instance.clock().map_or(0, |c| c.last_beat_ms());
    let shown: Map<String, Value> = m
        .iter()
        .filter(|(k, _)| !k.starts_with(PREFIX) && !k.starts_with("preserved."))
        .map(|(k, v)| (k.to_string(), Value::from(v)))
        .collect();
    let base = format!("http://{ip}:{}/", instance.port);
    json!({
        "instanceId": id_of(instance),
        "hostName": get(HOST_NAME).unwrap_or_else(|| ip.to_string()),
        "app": app,
        "ipAddr": ip,
        "status": status.as_str(),
        "overriddenStatus": get(OVERRIDDEN).unwrap_or_else(|| "UNKNOWN".into()),
        "port": {"$": instance.port, "@enabled": get(PORT_ENABLED).unwrap_or_else(|| "true".into())},
        "securePort": {
            "$": m.get(SECURE_PORT).and_then(|p| p.parse::<u16>().ok()).unwrap_or(443),
            "@enabled": get(SECURE_PORT_ENABLED).unwrap_or_else(|| "false".into()),
        },
        "countryId": m.get(COUNTRY).and_then(|c| c.parse::<i64>().ok()).unwrap_or(1),
        "dataCenterInfo": {
            "@class": DATA_CENTER_CLASS,
            "name": get(DATA_CENTER).unwrap_or_else(|| "MyOwn".into()),
        },
        "leaseInfo": {
            "renewalIntervalInSecs": hb.interval_ms / 1000,
            "durationInSecs": hb.delete_ms / 1000,
            "registrationTimestamp": registered,
            "lastRenewalTimestamp": renewed,
            "evictionTimestamp": 0,
            "serviceUpTimestamp": registered,
        },
        "metadata": shown,
        "homePageUrl": get(HOME_PAGE).unwrap_or_else(|| base.clone()),
        "statusPageUrl": get(STATUS_PAGE).unwrap_or_else(|| format!("{base}actuator/info")),
        "healthCheckUrl": get(HEALTH_CHECK).unwrap_or_else(|| format!("{base}actuator/health")),
        "vipAddress": get(VIP).unwrap_or_else(|| service.to_string()),
        "secureVipAddress": get(SVIP).unwrap_or_else(|| service.to_string()),
        "isCoordinatingDiscoveryServer": "false",
        "lastUpdatedTimestamp": modified_ms.to_string(),
        "lastDirtyTimestamp": get(DIRTY).unwrap_or_else(|| modified_ms.to_string()),
        "actionType": action,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the Java client (Spring Cloud Netflix) sends, trimmed.
    const BODY: &str = r#"{"instance":{
        "instanceId":"order-1","app":"ORDER-SERVICE","ipAddr":"127.0.0.5",
        "hostName":"127.0.0.5","status":"UP","overriddenStatus":"UNKNOWN",
        "port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},
        "countryId":1,"dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
        "leaseInfo":{"renewalIntervalInSecs":1,"durationInSecs":3},
        "metadata":{"zone":"az1","version":"1.2","eureka.status":"forged"},
        "vipAddress":"order-service","lastDirtyTimestamp":"1700000000000"}}"#;

    #[test]
    fn names_are_lower_cased_services_and_upper_cased_apps() {
        assert_eq!(service_of("ORDER-SERVICE"), "order-service");
        assert_eq!(app_of("order-service"), "ORDER-SERVICE");
    }

    #[test]
    fn statuses_decide_enabled_and_what_is_shown() {
        assert_eq!(Status::parse("out_of_service"), Some(Status::OutOfService));
        assert_eq!(Status::parse("sideways"), None);
        assert!(enabled_for(Status::Up));
        for s in [Status::Down, Status::Starting, Status::OutOfService] {
            assert!(!enabled_for(s), "{s:?}");
        }
        let mut m = Metadata::new();
        // A Nacos instance: from its flags.
        assert_eq!(shown_status(&m, true, true), Status::Up);
        assert_eq!(shown_status(&m, false, true), Status::Down);
        assert_eq!(shown_status(&m, true, false), Status::OutOfService);
        m.insert(STATUS.into(), "STARTING".into());
        assert_eq!(shown_status(&m, true, false), Status::Starting);
        m.insert(STATUS.into(), "UP".into());
        m.insert(OVERRIDDEN.into(), "OUT_OF_SERVICE".into());
        assert_eq!(effective(&m), Status::OutOfService);
        m.insert(OVERRIDDEN.into(), "UNKNOWN".into());
        assert_eq!(effective(&m), Status::Up);
        assert_eq!(shown_status(&m, false, true), Status::Down);
    }

    #[test]
    fn the_hashcode_counts_statuses_in_order() {
        assert_eq!(hashcode(["UP", "DOWN", "UP"]), "DOWN_1_UP_2_");
        assert_eq!(hashcode([]), "");
    }

    #[test]
    fn a_java_client_body_maps_per_the_readme() {
        let r = registered("order-service", BODY.as_bytes()).unwrap();
        assert_eq!(r.id, "order-1");
        let reg = &r.registration;
        assert_eq!((reg.ip.as_str(), reg.port), ("127.0.0.5", 8080));
        assert_eq!(reg.cluster, "az1");
        assert!(reg.ephemeral && reg.enabled);
        let m = &reg.metadata;
        assert_eq!(m["version"], "1.2");
        assert_eq!(m[STATUS], "UP");
        assert_eq!(m[INSTANCE_ID], "order-1");
        assert_eq!(m[APP], "ORDER-SERVICE");
        assert_eq!(m[DIRTY], "1700000000000");
        assert_eq!(m[BEAT_INTERVAL_KEY], "1000");
        assert_eq!(m[BEAT_TIMEOUT_KEY], "3000");
        assert_eq!(m[DELETE_TIMEOUT_KEY], "3000");
        assert!(!m.contains_key("@class"));
    }

    #[test]
    fn bad_bodies_are_refused_naming_the_field() {
        let refused = [
            (r#"{"app":"A"}"#, "'instance'"),
            (r#"{"instance":{"app":"A","port":80}}"#, "'instance.ipAddr'"),
            (
                r#"{"instance":{"ipAddr":"999.1.1.1","port":80}}"#,
                "'instance.ipAddr'",
            ),
            (
                r#"{"instance":{"app":"B","ipAddr":"127.0.0.1","port":80}}"#,
                "'instance.app'",
            ),
            (
                r#"{"instance":{"ipAddr":"127.0.0.1","port":{"$":70000}}}"#,
                "'instance.port'",
            ),
            (
                r#"{"instance":{"ipAddr":"127.0.0.1","port":{"$":"x"}}}"#,
                "'instance.port'",
            ),
            (r#"{"instance":{"ipAddr":"127.0.0.1"}}"#, "'instance.port'"),
            (
                r#"{"instance":{"ipAddr":"127.0.0.1","port":80,"status":"MAYBE"}}"#,
                "'instance.status'",
            ),
            (
                r#"{"instance":{"ipAddr":"127.0.0.1","port":80,"leaseInfo":{"durationInSecs":-4}}}"#,
                "'instance.leaseInfo.durationInSecs'",
            ),
            ("{", "'body'"),
        ];
        for (body, field) in refused {
            let e = registered("a", body.as_bytes()).unwrap_err();
            assert_eq!(e.http_status(), 400, "{body}");
            assert!(e.message.contains(field), "{body}: {}", e.message);
        }
        // Defaults: status UP, Eureka's 30 s / 90 s lease, the host as the id.
        let r = registered("a", br#"{"instance":{"ipAddr":"127.0.0.1","port":80}}"#).unwrap();
        assert_eq!(r.id, "127.0.0.1");
        assert_eq!(r.registration.metadata[DELETE_TIMEOUT_KEY], "90000");
        assert_eq!(r.registration.metadata[BEAT_TIMEOUT_KEY], "90000");
    }

    mod fuzz {
        use proptest::prelude::*;
        use serde_json::{json, Value};

        use super::*;

        /// Values of every JSON type, for any field.
        fn any_json() -> impl Strategy<Value = Value> {
            let leaf = prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                "\\PC{0,12}".prop_map(Value::from),
                Just(json!("127.0.0.1")),
                Just(json!("UP")),
            ];
            leaf.prop_recursive(2, 12, 4, |inner| {
                proptest::collection::btree_map("[$@a-zA-Z]{1,8}", inner, 0..4)
                    .prop_map(|m| json!(m))
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 2_000,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            /// Any bytes: a registration or a 400, never a panic.
            #[test]
            fn any_body(raw in proptest::collection::vec(any::<u8>(), 0..160)) {
                if let Err(e) = registered("a", &raw) {
                    prop_assert_eq!(e.http_status(), 400);
                }
            }

            /// Instance-shaped bodies with fields of any type: what is accepted is a
            /// loopback-or-valid address, an enabled flag that follows the status, and
            /// the beat timing within the lease; the rest is a 400. Shown back as XML
            /// without a panic.
            #[test]
            fn instance_shaped_bodies(
                fields in proptest::collection::btree_map(
                    prop_oneof![Just("ipAddr"), Just("port"), Just("securePort"), Just("status"), Just("leaseInfo"), Just("metadata"), Just("app"), Just("instanceId")],
                    any_json(),
                    0..8,
                ),
            ) {
                let body = json!({"instance": fields}).to_string();
                match registered("a", body.as_bytes()) {
                    Ok(r) => {
                        let reg = &r.registration;
                        prop_assert!(check_ip("ip", &reg.ip).is_ok());
                        prop_assert_eq!(reg.enabled, enabled_for(effective(&reg.metadata)));
                        let ms = |k: &str| reg.metadata[k].parse::<u64>().unwrap();
                        prop_assert!(ms(BEAT_TIMEOUT_KEY) <= ms(DELETE_TIMEOUT_KEY));
                        prop_assert_eq!(&reg.metadata[INSTANCE_ID], &r.id);
                    }
                    Err(e) => prop_assert_eq!(e.http_status(), 400),
                }
                let _ = super::super::super::xml::document(&json!({"instance": fields}));
            }
        }
    }
}
