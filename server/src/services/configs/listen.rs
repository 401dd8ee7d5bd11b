//! What a listener holds: per configuration item, the md5 of the content it has (empty:
//! none), in the tenant spelling it used, so that answers name items as it named them.
//! The HTTP long poll carries it as `Listening-Configs`
//! (`dataId ^2 group ^2 md5 [^2 tenant] ^1`, repeated), gRPC as listen contexts.

use super::validate::{check_config_group, check_data_id, check_tenant};
use super::{ConfigKey, Configs};
use roster_registry::validate::Invalid;

/// Separates the fields of an entry.
const WORD: char = '\u{2}';
/// Ends an entry.
const LINE: char = '\u{1}';

/// One listened item.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listened {
    /// Data id, as the listener spelled it.
    pub data_id: String,
    /// Group.
    pub group: String,
    /// Tenant, as the listener spelled it (empty: `public`).
    pub tenant: String,
    /// The md5 it holds; empty when it holds nothing.
    pub md5: String,
}

impl Listened {
    /// The item's key in the store.
    pub fn key(&self) -> ConfigKey {
        ConfigKey::new(&self.tenant, &self.group, &self.data_id)
    }

    /// Checks the names (the store's rules): a listener cannot name what could never
    /// be published.
    pub fn check(&self, field: &str) -> Result<(), Invalid> {
        check_data_id(field, &self.data_id)?;
        check_config_group(field, &self.group)?;
        check_tenant(field, &self.tenant)
    }
}

/// Parses `Listening-Configs`; at most `max` entries. A malformed entry is refused,
/// naming the field.
pub fn parse(field: &str, raw: &str, max: usize) -> Result<Vec<Listened>, Invalid> {
    let mut out = Vec::new();
    for entry in raw.split(LINE).filter(|e| !e.is_empty()) {
        let words: Vec<&str> = entry.split(WORD).collect();
        let (data_id, group, md5, tenant) = match words.as_slice() {
            [d, g, m] => (*d, *g, *m, ""),
            [d, g, m, t] => (*d, *g, *m, *t),
            _ => {
                return Err(Invalid::illegal(
                    field,
                    "each entry should be dataId^2group^2md5 or dataId^2group^2md5^2tenant, \
                     entries ending with ^1.",
                ))
            }
        };
        if out.len() == max {
            return Err(Invalid::illegal(
                field,
                format!("at most {max} configurations may be listened to at once (--config-max-listeners)."),
            ));
        }
        let listened = Listened {
            data_id: data_id.to_string(),
            group: group.to_string(),
            tenant: tenant.to_string(),
            md5: md5.to_string(),
        };
        listened.check(field)?;
        out.push(listened);
    }
    Ok(out)
}

/// The entries of `listened` whose item changed from what the listener holds.
pub fn changed<'a>(configs: &Configs, listened: &'a [Listened]) -> Vec<&'a Listened> {
    listened
        .iter()
        .filter(|l| configs.is_changed(&l.key(), &l.md5))
        .collect()
}

/// The long poll's answer naming `changed` (`dataId ^2 group [^2 tenant] ^1` each),
/// URL-encoded as Nacos answers it.
pub fn answer(changed: &[&Listened]) -> String {
    let mut raw = String::new();
    for l in changed {
        raw.push_str(&l.data_id);
        raw.push(WORD);
        raw.push_str(&l.group);
        if !l.tenant.is_empty() {
            raw.push(WORD);
            raw.push_str(&l.tenant);
        }
        raw.push(LINE);
    }
    form_urlencoded::byte_serialize(raw.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_configs_parse_with_and_without_tenant() {
        let raw = "app.yaml\u{2}DEFAULT_GROUP\u{2}\u{2}dev\u{1}b\u{2}G\u{2}abc\u{1}";
        let l = parse("Listening-Configs", raw, 10).unwrap();
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].tenant, "dev");
        assert_eq!(l[0].md5, "");
        assert_eq!(l[1].tenant, "");
        assert_eq!(l[1].key().namespace, "public");
        parse("Listening-Configs", "a\u{2}b\u{1}", 10).unwrap_err();
        parse("Listening-Configs", "a b\u{2}G\u{2}\u{1}", 10).unwrap_err();
        let e = parse("Listening-Configs", raw, 1).unwrap_err();
        assert!(e.to_string().contains("at most 1"), "{e}");
    }

    #[test]
    fn the_answer_names_items_as_the_listener_did() {
        let l = parse(
            "Listening-Configs",
            "a\u{2}G\u{2}x\u{2}dev\u{1}b\u{2}G\u{2}y\u{1}",
            10,
        )
        .unwrap();
        let refs: Vec<&Listened> = l.iter().collect();
        // As Nacos' URLEncoder: ^2 is %02, ^1 is %01.
        assert_eq!(answer(&refs), "a%02G%02dev%01b%02G%01");
    }
}
