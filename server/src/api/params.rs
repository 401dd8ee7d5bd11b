//! Request parameters as Nacos reads them: query string and urlencoded body merged (the
//! query first), on every method. Parsed once per request by the guard and handed to
//! handlers through request extensions; validation helpers name the field and the problem.

use std::borrow::Cow;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use smallvec::SmallVec;

use crate::error::Error;
use crate::registry::instance::Metadata;
use crate::registry::namespace::PUBLIC_NAMESPACE;
use crate::registry::selector::LabelSelector;
use crate::registry::service::ServiceKey;
use crate::registry::validate::{
    check_group, check_namespace_id, check_service_name, parse_bool, parse_metadata, parse_port,
    DEFAULT_GROUP,
};

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
    pub fn required(&self, key: &str) -> Result<&str, Error> {
        self.optional(key).ok_or_else(|| Error::missing(key))
    }

    /// A boolean (`true`/`false`, any case, and Nacos' `t|y|yes|on` / `f|n|no|off`).
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, Error> {
        Ok(self.optional(key).map(|v| parse_bool(key, v)).transpose()?)
    }

    /// The first present boolean among `keys` (an alias list like `enabled`, `enable`).
    pub fn boolean_any(&self, keys: &[&str]) -> Result<Option<bool>, Error> {
        for key in keys {
            if let Some(v) = self.boolean(key)? {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// A port, 0 to 65535.
    pub fn port(&self, key: &str) -> Result<u16, Error> {
        Ok(parse_port(key, self.required(key)?)?)
    }

    /// A positive page number or size.
    pub fn page(&self, key: &str, default: Option<usize>) -> Result<usize, Error> {
        match (self.optional(key), default) {
            (Some(v), _) => v
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| Error::illegal(key, format!("'{v}' is not a positive integer."))),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(Error::missing(key)),
        }
    }

    /// The namespace id (default `public`).
    pub fn namespace(&self) -> Result<String, Error> {
        self.namespace_str().map(str::to_string)
    }

    fn namespace_str(&self) -> Result<&str, Error> {
        let ns = self.optional("namespaceId").unwrap_or(PUBLIC_NAMESPACE);
        check_namespace_id("namespaceId", ns)?;
        Ok(ns)
    }

    /// The service key from `namespaceId`, `groupName` and `serviceName`, which may be
    /// grouped (`group@@name`, whose group then wins over `groupName`).
    pub fn service_key(&self) -> Result<ServiceKey, Error> {
        let (namespace, group, name, _) = self.service_parts()?;
        Ok(ServiceKey::new(namespace, group, name))
    }

    /// Namespace, group and name, checked, and `serviceName` when it carried the group
    /// (`group@@name`).
    fn service_parts(&self) -> Result<(&str, &str, &str, Option<&str>), Error> {
        let namespace = self.namespace_str()?;
        let raw = self.required("serviceName")?;
        let (group, name, grouped) = match raw.split_once("@@") {
            Some((group, name)) => {
                if group.is_empty() {
                    return Err(Error::illegal("serviceName", "groupName can't be empty"));
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
    pub fn service_name(&self) -> Result<ServiceName<'_>, Error> {
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
    pub fn selector(&self) -> Result<Option<LabelSelector>, Error> {
        match self.get("selector") {
            None => Ok(None),
            Some(raw) => LabelSelector::parse(raw)
                .map(Some)
                .map_err(|e| Error::illegal("selector", format!("{e}."))),
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
    pub fn consistent(&self) -> Result<bool, Error> {
        Ok(self.boolean("consistent")?.unwrap_or(false))
    }

    /// Instance metadata from `key`: a JSON object or `k=v,k2=v2`.
    pub fn metadata(&self, key: &str, max_bytes: usize) -> Result<Option<Metadata>, Error> {
        Ok(self
            .optional(key)
            .map(|raw| parse_metadata(key, raw, max_bytes))
            .transpose()?)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Error> {
        // The guard parses parameters for every request before routing.
        parts
            .extensions
            .get::<Params>()
            .cloned()
            .ok_or_else(|| Error::new(crate::error::ErrorKind::Internal, "parameters unavailable"))
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
}
