//! Nacos 3's fuzzy watch patterns and the keys they match: a pattern is
//! `namespace>>group>>name`, where the namespace is exact and each of group and name is
//! exact (no `*`), `*` (anything), `*part*` (contains), `*part` (ends with) or `part*`
//! (starts with); any other use of `*` matches nothing. The keys a watcher is told of
//! are written as Nacos clients parse them: `namespace@@group@@service` for services,
//! `dataId+group+tenant` (with `+` and `%` escaped) for configuration items.

use crate::error::Error;
use crate::services::configs::{namespace_of, ConfigKey};
use roster_registry::service::ServiceKey;
use roster_registry::validate::check_namespace_id;

/// What separates a pattern's three parts.
const SPLITTER: &str = ">>";
/// Longest pattern accepted, bytes: three names of at most a few hundred bytes each.
const MAX_PATTERN_BYTES: usize = 1024;

/// A watched pattern, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// The pattern as the client wrote it: it names the watch in every message.
    pub raw: String,
    /// The namespace id (`public` for an empty one).
    pub namespace: String,
    group: String,
    name: String,
}

impl Pattern {
    /// Reads `raw` (`namespace>>group>>name`); a pattern of another shape is refused,
    /// naming the field it came in.
    pub fn parse(field: &str, raw: &str) -> Result<Pattern, Error> {
        if raw.len() > MAX_PATTERN_BYTES {
            let problem = format!("longer than {MAX_PATTERN_BYTES} bytes");
            return Err(Error::illegal(field, problem));
        }
        let parts: Vec<&str> = raw.split(SPLITTER).collect();
        let [namespace, group, name] = parts[..] else {
            let problem = "it must be namespace>>group>>name";
            return Err(Error::illegal(field, problem));
        };
        if group.trim().is_empty() || name.trim().is_empty() {
            let problem = "its group and name patterns must not be blank";
            return Err(Error::illegal(field, problem));
        }
        let namespace = namespace_of(namespace.trim());
        check_namespace_id(field, namespace)?;
        Ok(Pattern {
            raw: raw.to_string(),
            namespace: namespace.to_string(),
            group: group.to_string(),
            name: name.to_string(),
        })
    }

    /// Whether it matches `name` in `group` of `namespace`.
    pub fn matches(&self, namespace: &str, group: &str, name: &str) -> bool {
        self.namespace == namespace
            && part_matches(&self.group, group)
            && part_matches(&self.name, name)
    }

    /// Whether it matches `item`.
    pub fn matches_item(&self, item: &Item) -> bool {
        self.matches(&item.namespace, &item.group, &item.name)
    }
}

/// Whether one part of a pattern matches `value`. As Nacos reads a part: every `*` is
/// taken out of it before the comparison, so `*a*b*` looks for `ab`.
fn part_matches(pattern: &str, value: &str) -> bool {
    if !pattern.contains('*') {
        return pattern == value;
    }
    let bare = pattern.replace('*', "");
    match (pattern.starts_with('*'), pattern.ends_with('*')) {
        (true, true) => value.contains(&bare),
        (true, false) => value.ends_with(&bare),
        (false, true) => value.starts_with(&bare),
        (false, false) => false,
    }
}

/// A watched thing, service or configuration item: its namespace, group and name (the
/// service name, or the data id).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Item {
    /// Namespace id (`public` for Nacos' empty tenant).
    pub namespace: String,
    /// Group.
    pub group: String,
    /// Service name (without the group) or data id.
    pub name: String,
}

impl Item {
    /// The item of service `key`.
    pub fn of_service(key: &ServiceKey) -> Item {
        Item {
            namespace: key.namespace.to_string(),
            group: key.group.to_string(),
            name: key.name.to_string(),
        }
    }

    /// The item of configuration `key`.
    pub fn of_config(key: &ConfigKey) -> Item {
        Item {
            namespace: key.namespace.clone(),
            group: key.group.clone(),
            name: key.data_id.clone(),
        }
    }

    /// The service key Nacos clients parse: `namespace@@group@@service`.
    pub fn service_key(&self) -> String {
        format!("{}@@{}@@{}", self.namespace, self.group, self.name)
    }

    /// The group key Nacos clients parse: `dataId+group+tenant`, each part with `+` as
    /// `%2B` and `%` as `%25`. The tenant is the namespace id, `public` included, as
    /// Nacos 3 writes it.
    pub fn group_key(&self) -> String {
        let mut out = String::with_capacity(self.name.len() + self.group.len() + 16);
        for (i, part) in [&self.name, &self.group, &self.namespace]
            .into_iter()
            .enumerate()
        {
            if i > 0 {
                out.push('+');
            }
            for c in part.chars() {
                match c {
                    '+' => out.push_str("%2B"),
                    '%' => out.push_str("%25"),
                    c => out.push(c),
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(raw: &str) -> Pattern {
        Pattern::parse("groupKeyPattern", raw).unwrap()
    }

    #[test]
    fn parts_match_exactly_or_by_their_star_as_nacos_reads_it() {
        let cases = [
            ("orders", "orders", true),
            ("orders", "orders-v2", false),
            ("*", "", true),
            ("*", "anything", true),
            ("**", "x", true),
            ("ord*", "orders", true),
            ("ord*", "borders", false),
            ("*ers", "orders", true),
            ("*ers", "ordersx", false),
            ("*der*", "orders", true),
            ("*der*", "ord", false),
            // Every star is taken out: `*a*b*` looks for `ab`.
            ("*a*b*", "xaby", true),
            ("*a*b*", "axb", false),
            // A star inside only matches nothing.
            ("a*b", "axb", false),
            ("a*b", "a*b", false),
        ];
        for (part, value, expected) in cases {
            assert_eq!(part_matches(part, value), expected, "{part} vs {value}");
        }
    }

    #[test]
    fn a_pattern_names_its_namespace_exactly_and_matches_group_and_name() {
        let p = pattern("public>>DEFAULT_*>>order*");
        assert!(p.matches("public", "DEFAULT_GROUP", "orders"));
        assert!(!p.matches("dev", "DEFAULT_GROUP", "orders"));
        assert!(!p.matches("public", "OTHER", "orders"));
        assert!(!p.matches("public", "DEFAULT_GROUP", "users"));
        // An empty namespace is the public one.
        assert_eq!(pattern(">>G>>*").namespace, "public");
        assert_eq!(pattern(">>G>>*").raw, ">>G>>*");
    }

    #[test]
    fn a_pattern_of_another_shape_is_refused_naming_the_field() {
        for raw in [
            "",
            "public>>G",
            "public>>G>>a>>b",
            "public>> >>a",
            "public>>G>>",
            "bad ns>>G>>a",
        ] {
            let e = Pattern::parse("groupKeyPattern", raw).unwrap_err();
            assert!(e.message.contains("groupKeyPattern"), "{raw}: {e}");
        }
        let long = format!("public>>G>>{}", "a".repeat(MAX_PATTERN_BYTES));
        assert!(Pattern::parse("groupKeyPattern", &long).is_err());
    }

    #[test]
    fn keys_are_written_as_clients_parse_them() {
        let service = Item::of_service(&ServiceKey::new("public", "G", "orders"));
        assert_eq!(service.service_key(), "public@@G@@orders");
        let config = Item::of_config(&ConfigKey::new("", "G+1", "a%b.yaml"));
        assert_eq!(config.group_key(), "a%25b.yaml+G%2B1+public");
        let config = Item::of_config(&ConfigKey::new("dev", "G", "a"));
        assert_eq!(config.group_key(), "a+G+dev");
    }
}
