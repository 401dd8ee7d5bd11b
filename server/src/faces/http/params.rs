//! Request parameters as Nacos reads them: query string and urlencoded body merged (the
//! query first), on every method. Parsed once per request by the guard and handed to
//! handlers through request extensions; a key or value that is not UTF-8 is refused
//! there, for every route. Validation helpers name the field and the problem.

use std::borrow::Cow;
use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use smallvec::SmallVec;

use crate::error::Error;
use roster_registry::instance::Metadata;
use roster_registry::namespace::PUBLIC_NAMESPACE;
use roster_registry::selector::LabelSelector;
use roster_registry::service::ServiceKey;
use roster_registry::validate::{
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
    /// does, but into one buffer: `+` is a space, `%XX` a byte (other `%`s stay).
    /// Every key and value must be UTF-8 on its own: the first that is not is refused,
    /// named (a value by its key, a key as it was sent), rather than replaced lossily,
    /// which would make `bad%FF` and `bad%FE` one and the same `bad\u{FFFD}`.
    fn new(inputs: &[&[u8]]) -> Result<Self, Error> {
        let mut bytes = Vec::with_capacity(inputs.iter().map(|i| i.len()).sum());
        let mut spans = SmallVec::new();
        for (key, value) in inputs.iter().flat_map(|i| pairs_of(i)) {
            let key_start = bytes.len();
            percent_decode(&mut bytes, key);
            let value_start = bytes.len();
            percent_decode(&mut bytes, value);
            spans.push((key_start, value_start, bytes.len()));
        }
        // One check of the whole text; then each part is UTF-8 exactly when it starts
        // and ends on character boundaries (`%E4%B8=%AD` is UTF-8 only as a whole).
        let text = String::from_utf8(bytes).map_err(|e| Self::refusal(e.as_bytes(), &spans))?;
        let whole = |&(k, v, end): &(usize, usize, usize)| {
            text.is_char_boundary(k) && text.is_char_boundary(v) && text.is_char_boundary(end)
        };
        if !spans.iter().all(whole) {
            return Err(Self::refusal(text.as_bytes(), &spans));
        }
        Ok(Self { text, spans })
    }

    /// The error for the first key or value in `bytes` that is not UTF-8 on its own.
    fn refusal(bytes: &[u8], spans: &[(usize, usize, usize)]) -> Error {
        let utf8 = |part: &[u8]| std::str::from_utf8(part).is_ok();
        for &(k, v, end) in spans {
            let key = &bytes[k..v];
            if !utf8(key) {
                return Error::bad_request(format!(
                    "A parameter name is not valid UTF-8: '{}'.",
                    escape(key)
                ));
            }
            if !utf8(&bytes[v..end]) {
                let name = std::str::from_utf8(key).expect("checked above");
                return Error::illegal(name, "its value is not valid UTF-8.");
            }
        }
        Error::bad_request("The parameters are not valid UTF-8.")
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

/// `bytes` with every byte that is not printable ASCII percent-encoded: how a client
/// sent a name that is not UTF-8, to quote it back.
fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 3);
    for &b in bytes {
        if b.is_ascii_graphic() && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl Params {
    /// Parses a query string and an optional urlencoded body. A key or value that is
    /// not UTF-8 once decoded is refused (400 naming it): nothing may act on a
    /// replacement character the client never sent.
    pub fn parse(query: Option<&str>, form: Option<&[u8]>) -> Result<Self, Error> {
        let decoded = match (query, form) {
            (Some(q), Some(f)) => Decoded::new(&[q.as_bytes(), f])?,
            (Some(q), None) => Decoded::new(&[q.as_bytes()])?,
            (None, Some(f)) => Decoded::new(&[f])?,
            (None, None) => Decoded::default(),
        };
        Ok(Self {
            decoded: Arc::new(decoded),
        })
    }

    /// Every pair, in the order given (the Eureka face's metadata updates take them all).
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.decoded.pairs()
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
            None => Cow::Owned(roster_registry::service::grouped(group, name)),
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

    /// `form_urlencoded`'s pairs of `input` (it replaces bytes that are not UTF-8 with
    /// U+FFFD; parameters must refuse them instead).
    fn reference(input: &[u8]) -> Vec<(String, String)> {
        form_urlencoded::parse(input).into_owned().collect()
    }

    fn pairs(params: &Params) -> Vec<(String, String)> {
        params
            .decoded
            .pairs()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn decodes_as_form_urlencoded_does() {
        let inputs: [&[u8]; 11] = [
            b"a=1&b=2",
            b"&&a=&=b&c",
            b"k=a+b%20c%2Bd",
            b"bad=%zz%4&end=%",
            b"%E4%B8%AD=%E6%96%87",
            b"beat=%7B%22ip%22%3A%2210.0.0.1%22%7D",
            b"dup=1&dup=2",
            b"eq=a=b=c",
            b"",
            b"=",
            b"a%3Db=c%26d",
        ];
        for input in inputs {
            let ours = pairs(&Params::parse(None, Some(input)).unwrap());
            let theirs = reference(input);
            assert_eq!(ours, theirs, "{}", String::from_utf8_lossy(input));
        }
        // Query and body: one text, pairs in order.
        let both = Params::parse(Some("a=1"), Some(b"b=%C3%A9")).unwrap();
        assert_eq!(
            pairs(&both),
            [("a".into(), "1".into()), ("b".into(), "\u{e9}".into())]
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused_by_name() {
        let table: [(&str, &[u8], &str); 7] = [
            (
                "serviceName=bad%FF%FE",
                b"",
                "Param 'serviceName' is illegal, its value is not valid UTF-8.",
            ),
            (
                "ok=1",
                b"clusterName=%FF",
                "Param 'clusterName' is illegal, its value is not valid UTF-8.",
            ),
            (
                "metadata=%7B%22k%22%3A%22%C3%22%7D",
                b"",
                "Param 'metadata' is illegal",
            ),
            (
                "na%FFme=1",
                b"",
                "A parameter name is not valid UTF-8: 'na%FFme'.",
            ),
            (
                "",
                b"k%E9y=v",
                "A parameter name is not valid UTF-8: 'k%E9y'.",
            ),
            // UTF-8 only as a whole: the key ends inside a character the value finishes.
            (
                "%E4%B8=%AD",
                b"",
                "A parameter name is not valid UTF-8: '%E4%B8'.",
            ),
            (
                "a=%E4%B8&%AD=b",
                b"",
                "Param 'a' is illegal, its value is not valid UTF-8.",
            ),
        ];
        for (query, body, message) in table {
            let form = (!body.is_empty()).then_some(body);
            let e = Params::parse(Some(query), form).unwrap_err();
            assert_eq!(e.kind, crate::error::ErrorKind::InvalidParameter, "{query}");
            assert!(e.message.starts_with(message), "{query}: {}", e.message);
        }
        // Raw bytes in a body, not percent-encoded, are held to the same rule.
        let e = Params::parse(None, Some(b"serviceName=x\xff")).unwrap_err();
        assert!(e.message.contains("'serviceName'"), "{}", e.message);
    }

    #[test]
    fn query_wins_over_body_and_blank_is_absent() {
        let p = Params::parse(Some("a=1&b=&c=%20"), Some(b"a=2&d=4")).unwrap();
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
        let p = Params::parse(Some("serviceName=g1%40%40svc&groupName=ignored"), None).unwrap();
        let k = p.service_key().unwrap();
        assert_eq!(
            (&*k.namespace, &*k.group, &*k.name),
            ("public", "g1", "svc")
        );
        let p = Params::parse(Some("serviceName=svc&namespaceId=dev"), None).unwrap();
        let k = p.service_key().unwrap();
        assert_eq!((&*k.namespace, &*k.group), ("dev", "DEFAULT_GROUP"));
        let p = Params::parse(Some("serviceName=%40%40svc"), None).unwrap();
        assert!(p
            .service_key()
            .unwrap_err()
            .message
            .contains("groupName can't be empty"));
        let p = Params::parse(Some("serviceName=a%20b"), None).unwrap();
        assert!(p.service_key().unwrap_err().message.contains("serviceName"));
    }

    #[test]
    fn service_names_are_grouped_once() {
        let given = Params::parse(Some("serviceName=G%40%40svc&groupName=other"), None).unwrap();
        let plain = Params::parse(Some("serviceName=svc&groupName=G"), None).unwrap();
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

    mod fuzz {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 3_000,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            /// Arbitrary bytes as query and body: never a panic; accepted exactly when
            /// every decoded key and value is UTF-8, and then as `form_urlencoded` reads
            /// them; every accessor answers.
            #[test]
            fn arbitrary_bytes(
                query in proptest::collection::vec(prop_oneof![Just(b'%'), Just(b'&'), Just(b'='), Just(b'+'), any::<u8>()], 0..64),
                body in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
            ) {
                // A query reaches us as text; its bytes beyond ASCII arrive %-encoded.
                let query: String = query.iter().map(|&b| if b.is_ascii() { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
                let parsed = Params::parse(Some(&query), body.as_deref());
                let mut all = query.clone().into_bytes();
                if let Some(b) = &body {
                    all.push(b'&');
                    all.extend_from_slice(b);
                }
                let theirs = reference(&all);
                match parsed {
                    // Accepted: as `form_urlencoded` reads it, nothing replaced.
                    Ok(params) => {
                        prop_assert_eq!(pairs(&params), theirs);
                        for (k, _) in pairs(&params) {
                            let _ = (params.get(&k), params.optional(&k), params.boolean(&k), params.port(&k));
                            let _ = (params.metadata(&k, 64), params.page(&k, Some(1)));
                        }
                        let _ = (params.service_name(), params.selector(), params.lanes(), params.namespace());
                    }
                    // Refused: there was something `form_urlencoded` had to replace.
                    Err(e) => {
                        prop_assert_eq!(e.kind, crate::error::ErrorKind::InvalidParameter);
                        prop_assert!(theirs.iter().any(|(k, v)| k.contains('\u{FFFD}') || v.contains('\u{FFFD}')), "{}", e.message);
                    }
                }
            }

            /// Any UTF-8 keys and values, encoded as a client would, come back as they were.
            #[test]
            fn text_round_trips(given in proptest::collection::vec(("\\PC{0,12}", "\\PC{0,12}"), 0..8)) {
                let encoded = form_urlencoded::Serializer::new(String::new()).extend_pairs(&given).finish();
                let (query, body) = encoded.split_at(encoded.len() / 2);
                // Split anywhere, even inside an escape: query and body are two inputs.
                let whole = Params::parse(Some(&encoded), None).unwrap();
                prop_assert_eq!(pairs(&whole), given);
                let _ = Params::parse(Some(query), Some(body.as_bytes()));
            }
        }
    }
}
