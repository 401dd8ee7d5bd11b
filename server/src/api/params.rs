//! Request parameters as Nacos reads them: query string and urlencoded body merged (the
//! query first), on every method. Parsed once per request by the guard and handed to
//! handlers through request extensions; validation helpers name the field and the problem.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use smallvec::SmallVec;

use super::error::ApiError;
use crate::registry::instance::{
    Metadata, BEAT_INTERVAL_KEY, BEAT_TIMEOUT_KEY, DELETE_TIMEOUT_KEY,
};
use crate::registry::namespace::PUBLIC_NAMESPACE;
use crate::registry::selector::LabelSelector;
use crate::registry::service::ServiceKey;

/// The default group.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// The default cluster.
pub const DEFAULT_CLUSTER: &str = "DEFAULT";

/// Merged request parameters, in arrival order (query first, then body). Cheap to
/// clone: the guard parses once and handlers share the pairs.
#[derive(Clone, Debug, Default)]
pub struct Params {
    decoded: Arc<Decoded>,
}

/// Every decoded key and value back to back in one string, and where each pair lies in
/// it: the string and the `Arc` are the only allocations for up to 8 pairs.
#[derive(Debug, Default)]
struct Decoded {
    text: String,
    /// Per pair: key start, value start (the key's end), value end.
    spans: SmallVec<[(usize, usize, usize); 8]>,
}

impl Decoded {
    /// Decodes `inputs` (each `application/x-www-form-urlencoded`) as `form_urlencoded`
    /// does, but into one buffer: `+` is a space, `%XX` a byte (other `%`s stay), and
    /// text that is not UTF-8 is replaced lossily, per key and value.
    fn new(inputs: &[&[u8]]) -> Self {
        let mut bytes = Vec::with_capacity(inputs.iter().map(|i| i.len()).sum());
        let mut spans = SmallVec::new();
        for (key, value) in inputs.iter().flat_map(|i| pairs_of(i)) {
            let key_start = bytes.len();
            percent_decode(&mut bytes, key);
            let value_start = bytes.len();
            percent_decode(&mut bytes, value);
            spans.push((key_start, value_start, bytes.len()));
        }
        match String::from_utf8(bytes) {
            Ok(text) => Self { text, spans },
            Err(e) => Self::lossy(&e.into_bytes(), &spans),
        }
    }

    /// [`Decoded::new`]'s bytes when they are not UTF-8 (rare): each key and value
    /// replaced lossily on its own, as `form_urlencoded` does.
    fn lossy(bytes: &[u8], spans: &[(usize, usize, usize)]) -> Self {
        let mut text = String::with_capacity(bytes.len());
        let push = |text: &mut String, part: &[u8]| {
            text.push_str(&String::from_utf8_lossy(part));
            text.len()
        };
        let spans = spans
            .iter()
            .map(|&(key, value, end)| {
                let key_start = text.len();
                let value_start = push(&mut text, &bytes[key..value]);
                (key_start, value_start, push(&mut text, &bytes[value..end]))
            })
            .collect();
        Self { text, spans }
    }

    fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans
            .iter()
            .map(|&(k, v, end)| (&self.text[k..v], &self.text[v..end]))
    }
}

/// The raw `key=value` pairs of urlencoded `input`: split at `&`, empty pieces skipped,
/// a piece without `=` is a key with an empty value.
fn pairs_of(input: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    input
        .split(|b| *b == b'&')
        .filter(|piece| !piece.is_empty())
        .map(|piece| match piece.iter().position(|b| *b == b'=') {
            Some(at) => (&piece[..at], &piece[at + 1..]),
            None => (piece, &piece[piece.len()..]),
        })
}

/// Appends `raw` percent-decoded, `+` as a space.
fn percent_decode(out: &mut Vec<u8>, raw: &[u8]) {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'+' => out.push(b' '),
            b'%' => match (
                raw.get(i + 1).and_then(|b| hex(*b)),
                raw.get(i + 2).and_then(|b| hex(*b)),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push(hi << 4 | lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
}

impl Params {
    /// Parses a query string and an optional urlencoded body.
    pub fn parse(query: Option<&str>, form: Option<&[u8]>) -> Self {
        let decoded = match (query, form) {
            (Some(q), Some(f)) => Decoded::new(&[q.as_bytes(), f]),
            (Some(q), None) => Decoded::new(&[q.as_bytes()]),
            (None, Some(f)) => Decoded::new(&[f]),
            (None, None) => Decoded::default(),
        };
        Self {
            decoded: Arc::new(decoded),
        }
    }

    /// The first value of `key`, as given.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.decoded
            .pairs()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    /// The first value of `key`, or `None` when absent or blank (Nacos' `optional`).
    pub fn optional(&self, key: &str) -> Option<&str> {
        self.get(key).map(str::trim).filter(|v| !v.is_empty())
    }

    /// The value of the first of `keys` that is present and not blank.
    pub fn optional_any(&self, keys: &[&str]) -> Option<&str> {
        keys.iter().find_map(|k| self.optional(k))
    }

    /// The value of `key`; 400 `Param 'key' is required.` when absent or blank.
    pub fn required(&self, key: &str) -> Result<&str, ApiError> {
        self.optional(key).ok_or_else(|| ApiError::missing(key))
    }

    /// A boolean (`true`/`false`, any case, and Nacos' `t|y|yes|on` / `f|n|no|off`).
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, ApiError> {
        self.optional(key).map(|v| parse_bool(key, v)).transpose()
    }

    /// The first present boolean among `keys` (an alias list like `enabled`, `enable`).
    pub fn boolean_any(&self, keys: &[&str]) -> Result<Option<bool>, ApiError> {
        for key in keys {
            if let Some(v) = self.boolean(key)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// A port, 0 to 65535.
    pub fn port(&self, key: &str) -> Result<u16, ApiError> {
        parse_port(key, self.required(key)?)
    }

    /// A positive page number or size.
    pub fn page(&self, key: &str, default: Option<usize>) -> Result<usize, ApiError> {
        match (self.optional(key), default) {
            (Some(v), _) => {
                v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    ApiError::illegal(key, format!("'{v}' is not a positive integer."))
                })
            }
            (None, Some(d)) => Ok(d),
            (None, None) => Err(ApiError::missing(key)),
        }
    }

    /// The namespace id (default `public`).
    pub fn namespace(&self) -> Result<String, ApiError> {
        self.namespace_str().map(str::to_string)
    }

    fn namespace_str(&self) -> Result<&str, ApiError> {
        let ns = self.optional("namespaceId").unwrap_or(PUBLIC_NAMESPACE);
        check_namespace_id("namespaceId", ns)?;
        Ok(ns)
    }

    /// The service key from `namespaceId`, `groupName` and `serviceName`, which may be
    /// grouped (`group@@name`, whose group then wins over `groupName`).
    pub fn service_key(&self) -> Result<ServiceKey, ApiError> {
        let (namespace, group, name, _) = self.service_parts()?;
        Ok(ServiceKey::new(namespace, group, name))
    }

    /// Namespace, group and name, checked, and `serviceName` when it carried the group
    /// (`group@@name`).
    fn service_parts(&self) -> Result<(&str, &str, &str, Option<&str>), ApiError> {
        let namespace = self.namespace_str()?;
        let raw = self.required("serviceName")?;
        let (group, name, grouped) = match raw.split_once("@@") {
            Some((group, name)) => {
                if group.is_empty() {
                    return Err(ApiError::illegal("serviceName", "groupName can't be empty"));
                }
                (group, name, Some(raw))
            }
            None => (
                self.optional("groupName").unwrap_or(DEFAULT_GROUP),
                raw,
                None,
            ),
        };
        check_group(group)?;
        check_service_name(name)?;
        Ok((namespace, group, name, grouped))
    }

    /// The service named by `namespaceId`, `groupName` and `serviceName`, borrowed from
    /// the parameters (checked as [`Params::service_key`] checks them).
    pub fn service_name(&self) -> Result<ServiceName<'_>, ApiError> {
        let (namespace, group, name, grouped) = self.service_parts()?;
        // The grouped form as given, else written once.
        let grouped = match grouped {
            Some(raw) => Cow::Borrowed(raw),
            None => Cow::Owned(crate::registry::service::grouped(group, name)),
        };
        Ok(ServiceName {
            namespace,
            group,
            name,
            grouped,
        })
    }

    /// A metadata selector from `selector` (label-selector syntax).
    pub fn selector(&self) -> Result<Option<LabelSelector>, ApiError> {
        match self.get("selector") {
            None => Ok(None),
            Some(raw) => LabelSelector::parse(raw)
                .map(Some)
                .map_err(|e| ApiError::illegal("selector", format!("{e}."))),
        }
    }

    /// Lanes from `lanes` (comma-separated, in order of preference). Present but empty
    /// means the base lane only; absent means lanes are ignored.
    pub fn lanes(&self) -> Option<Vec<&str>> {
        self.get("lanes").map(|raw| {
            raw.split(',')
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect()
        })
    }

    /// Whether the caller asked for a linearizable read (`consistent=true`).
    pub fn consistent(&self) -> Result<bool, ApiError> {
        Ok(self.boolean("consistent")?.unwrap_or(false))
    }

    /// Instance metadata from `key`: a JSON object or `k=v,k2=v2`.
    pub fn metadata(&self, key: &str, max_bytes: usize) -> Result<Option<Metadata>, ApiError> {
        self.optional(key)
            .map(|raw| parse_metadata(key, raw, max_bytes))
            .transpose()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        // The guard parses parameters for every request before routing.
        parts.extensions.get::<Params>().cloned().ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "parameters unavailable",
            )
        })
    }
}

/// A service named by request parameters, before it is looked up.
pub struct ServiceName<'p> {
    /// Namespace id.
    pub namespace: &'p str,
    /// Group.
    pub group: &'p str,
    /// Name without the group.
    pub name: &'p str,
    /// `group@@name`, as services are kept.
    pub grouped: Cow<'p, str>,
}

impl ServiceName<'_> {
    /// An owned key.
    pub fn key(&self) -> ServiceKey {
        ServiceKey::new(self.namespace, self.group, self.name)
    }
}

/// Parses a boolean as Nacos clients send it.
pub fn parse_bool(key: &str, value: &str) -> Result<bool, ApiError> {
    const TRUE: [&str; 6] = ["true", "t", "yes", "y", "on", "1"];
    const FALSE: [&str; 6] = ["false", "f", "no", "n", "off", "0"];
    let v = value.trim();
    if TRUE.iter().any(|t| t.eq_ignore_ascii_case(v)) {
        return Ok(true);
    }
    if FALSE.iter().any(|f| f.eq_ignore_ascii_case(v)) {
        return Ok(false);
    }
    Err(ApiError::illegal(
        key,
        format!("'{value}' is not a boolean (true or false)."),
    ))
}

/// Parses a port, 0 to 65535.
pub fn parse_port(key: &str, value: &str) -> Result<u16, ApiError> {
    let port = value.trim().parse::<i64>().map_err(|_| port_range(key))?;
    check_port(key, port)
}

/// Checks a port given as a number (JSON bodies): 0 to 65535.
pub fn check_port(key: &str, port: i64) -> Result<u16, ApiError> {
    u16::try_from(port).map_err(|_| port_range(key))
}

fn port_range(key: &str) -> ApiError {
    ApiError::illegal(key, "the value should be between 0 and 65535.")
}

/// Parses a weight, 0 to 10000.
pub fn parse_weight(key: &str, value: &str) -> Result<f64, ApiError> {
    let w: f64 = value
        .trim()
        .parse()
        .map_err(|_| ApiError::illegal(key, format!("'{value}' is not a number.")))?;
    check_weight(w)
}

/// Checks a weight given as a number (JSON bodies): 0 to 10000.
pub fn check_weight(weight: f64) -> Result<f64, ApiError> {
    if !weight.is_finite() || !(0.0..=10000.0).contains(&weight) {
        return Err(ApiError::bad_request(
            "instance format invalid: The weights range from 0.0 to 10000.0",
        ));
    }
    Ok(weight)
}

/// Checks an IP address or host name.
pub fn check_ip(key: &str, ip: &str) -> Result<(), ApiError> {
    if ip.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let host_ok = ip.len() <= 253
        && ip.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if host_ok {
        Ok(())
    } else {
        Err(ApiError::illegal(
            key,
            format!("'{ip}' is not an IP address or host name."),
        ))
    }
}

/// Checks a namespace id: 1 to 128 of `[A-Za-z0-9_-]`.
pub fn check_namespace_id(key: &str, id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ApiError::illegal(
            key,
            "it should be 1 to 128 characters of letters, digits, '_' and '-'.",
        ))
    }
}

/// Checks a group: up to 128 of `[A-Za-z0-9-_:.]`.
pub fn check_group(group: &str) -> Result<(), ApiError> {
    let ok = group.len() <= 128
        && group
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::illegal(
            "groupName",
            "it should be up to 128 characters of letters, digits and '-_:.'.",
        ))
    }
}

/// Checks a service name (without group): 1 to 512 characters, no whitespace or control
/// characters, no leading '@' and no '@@'.
pub fn check_service_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() {
        return Err(ApiError::missing("serviceName"));
    }
    if name.chars().count() > 512 {
        return Err(ApiError::illegal(
            "serviceName",
            "the param length should not exceed 512.",
        ));
    }
    if name.starts_with('@')
        || name.contains("@@")
        || name.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(ApiError::illegal(
            "serviceName",
            "illegal characters should not appear in the param.",
        ));
    }
    Ok(())
}

/// Checks a cluster name at registration: `[0-9a-zA-Z-]`, up to 64 (Nacos' rule).
pub fn check_cluster_name(cluster: &str) -> Result<(), ApiError> {
    let ok = !cluster.is_empty()
        && cluster.len() <= 64
        && cluster
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Instance 'clusterName' should be characters with only 0-9a-zA-Z-. (current: {cluster})"
        )))
    }
}

/// Splits and checks a comma-separated cluster filter (`[0-9a-zA-Z-_]` each).
pub fn parse_cluster_list(raw: &str) -> Result<Vec<&str>, ApiError> {
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
            return Err(ApiError::illegal(
                "clusters",
                format!("'{c}' should be up to 64 characters of letters, digits, '-' and '_'."),
            ));
        }
    }
    Ok(clusters)
}

/// Parses metadata: a JSON object (values become strings) or `k=v,k2=v2`.
pub fn parse_metadata(key: &str, raw: &str, max_bytes: usize) -> Result<Metadata, ApiError> {
    let metadata = if raw.trim_start().starts_with('{') {
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(raw)
            .map_err(|e| ApiError::illegal(key, format!("it is not a valid JSON object: {e}.")))?;
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
                return Err(ApiError::bad_request(format!(
                    "metadata format incorrect:{raw}"
                )));
            }
            m.insert(parts[0].trim().to_string(), parts[1].trim().to_string());
        }
        m
    };
    check_metadata(key, &metadata, max_bytes)?;
    Ok(metadata)
}

/// Checks parsed metadata: its size (keys plus values) and the heartbeat rule.
pub fn check_metadata(key: &str, metadata: &Metadata, max_bytes: usize) -> Result<(), ApiError> {
    let size: usize = metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > max_bytes {
        return Err(ApiError::illegal(
            key,
            format!("the param length should not exceed {max_bytes}."),
        ));
    }
    check_heartbeat_metadata(metadata)
}

/// Nacos' rule: the beat interval must be below the beat and delete timeouts.
fn check_heartbeat_metadata(metadata: &Metadata) -> Result<(), ApiError> {
    let read = |k: &str| metadata.get(k).and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(interval) = read(BEAT_INTERVAL_KEY) {
        let timeout = read(BEAT_TIMEOUT_KEY).unwrap_or(15_000);
        let delete = read(DELETE_TIMEOUT_KEY).unwrap_or(30_000);
        if timeout < interval || delete < interval {
            return Err(ApiError::bad_request(
                "Instance 'heart beat interval' must less than 'heart beat timeout' and 'ip delete timeout'.",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_as_form_urlencoded_does() {
        let inputs: [&[u8]; 12] = [
            b"a=1&b=2",
            b"&&a=&=b&c",
            b"k=a+b%20c%2Bd",
            b"bad=%zz%4&end=%",
            b"%E4%B8%AD=%E6%96%87",
            b"bytes=%FF%FEx&next=ok",
            b"beat=%7B%22ip%22%3A%2210.0.0.1%22%7D",
            b"dup=1&dup=2",
            b"eq=a=b=c",
            b"",
            b"=",
            b"a%3Db=c%26d",
        ];
        for input in inputs {
            let ours = Decoded::new(&[input]);
            let theirs: Vec<(String, String)> = form_urlencoded::parse(input)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect();
            let ours: Vec<(String, String)> = ours
                .pairs()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(input));
        }
        // Query and body: one text, pairs in order.
        let both = Decoded::new(&[b"a=1", b"b=%FF"]);
        assert_eq!(
            both.pairs().collect::<Vec<_>>(),
            [("a", "1"), ("b", "\u{FFFD}")]
        );
    }

    #[test]
    fn query_wins_over_body_and_blank_is_absent() {
        let p = Params::parse(Some("a=1&b=&c=%20"), Some(b"a=2&d=4"));
        assert_eq!(p.get("a"), Some("1"));
        assert_eq!(p.optional("b"), None);
        assert_eq!(p.optional("c"), None);
        assert_eq!(p.optional("d"), Some("4"));
        assert_eq!(
            p.required("b").unwrap_err().message,
            "Param 'b' is required."
        );
    }

    #[test]
    fn grouped_service_names() {
        let p = Params::parse(Some("serviceName=g1%40%40svc&groupName=ignored"), None);
        let k = p.service_key().unwrap();
        assert_eq!(
            (&*k.namespace, &*k.group, &*k.name),
            ("public", "g1", "svc")
        );
        let p = Params::parse(Some("serviceName=svc&namespaceId=dev"), None);
        let k = p.service_key().unwrap();
        assert_eq!((&*k.namespace, &*k.group), ("dev", "DEFAULT_GROUP"));
        let p = Params::parse(Some("serviceName=%40%40svc"), None);
        assert!(p
            .service_key()
            .unwrap_err()
            .message
            .contains("groupName can't be empty"));
        let p = Params::parse(Some("serviceName=a%20b"), None);
        assert!(p.service_key().unwrap_err().message.contains("serviceName"));
    }

    #[test]
    fn service_names_are_grouped_once() {
        let given = Params::parse(Some("serviceName=G%40%40svc&groupName=other"), None);
        let plain = Params::parse(Some("serviceName=svc&groupName=G"), None);
        for p in [&given, &plain] {
            let n = p.service_name().unwrap();
            assert_eq!((n.namespace, n.group, n.name), ("public", "G", "svc"));
            assert_eq!(&*n.grouped, "G@@svc");
            assert_eq!(n.key(), p.service_key().unwrap());
        }
        // Borrowed when the client sent it grouped.
        assert!(matches!(
            given.service_name().unwrap().grouped,
            std::borrow::Cow::Borrowed(_)
        ));
    }

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
}
