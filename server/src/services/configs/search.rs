//! Searching the configuration items, as the console and Nacos' list API search them:
//! by namespace, dataId and group (exact, or as patterns), application and tags, one
//! page at a time.

use super::{ConfigItem, ConfigKey, Configs};

/// A search of the items.
#[derive(Clone, Debug, Default)]
pub struct Search<'a> {
    /// Only this namespace (all when `None`).
    pub namespace: Option<&'a str>,
    /// The dataId: exact, or with `blur` a pattern (`*` any run; without `*`, a part).
    pub data_id: Option<&'a str>,
    /// The group, likewise.
    pub group: Option<&'a str>,
    /// Exactly this application.
    pub app_name: Option<&'a str>,
    /// Items carrying every one of these tags.
    pub tags: Vec<&'a str>,
    /// Patterns rather than exact names.
    pub blur: bool,
}

/// One page of a search.
pub struct Page {
    /// How many items matched in all.
    pub total: usize,
    /// The items of the page, by key.
    pub items: Vec<(ConfigKey, ConfigItem)>,
}

/// Whether `value` matches `pattern` (`*` any run of characters).
pub(super) fn glob(pattern: &str, value: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == value;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !value.starts_with(first) || value.len() < first.len() + last.len() {
        return false;
    }
    let mut rest = &value[first.len()..value.len() - last.len()];
    if !value.ends_with(last) {
        return false;
    }
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Whether `value` is matched by `wanted`: exactly, or under `blur` as a pattern (a
/// pattern without `*` matches any value containing it).
fn name_matches(wanted: Option<&str>, value: &str, blur: bool) -> bool {
    match wanted {
        None => true,
        Some(w) if !blur => w == value,
        Some(w) if w.contains('*') => glob(w, value),
        Some(w) => value.contains(w),
    }
}

impl Configs {
    /// The items matching `search` that `visible` admits (the caller's permissions),
    /// ordered by namespace, group and dataId; page `page_no` (from 1) of `page_size`.
    pub fn search(
        &self,
        search: &Search,
        visible: impl Fn(&ConfigKey, &ConfigItem) -> bool,
        page_no: usize,
        page_size: usize,
    ) -> Page {
        let state = self.0.state.read();
        // Keys order by namespace first: one namespace is one range.
        let all: Box<dyn Iterator<Item = (&ConfigKey, &ConfigItem)>> = match search.namespace {
            Some(ns) => {
                let from = ConfigKey {
                    namespace: ns.to_string(),
                    group: String::new(),
                    data_id: String::new(),
                };
                Box::new(
                    state
                        .items
                        .range(from..)
                        .take_while(move |(k, _)| k.namespace == ns),
                )
            }
            None => Box::new(state.items.iter()),
        };
        let matching = all.filter(|(k, item)| {
            name_matches(search.data_id, &k.data_id, search.blur)
                && name_matches(search.group, &k.group, search.blur)
                && search.app_name.is_none_or(|a| a == item.app_name)
                && search
                    .tags
                    .iter()
                    .all(|t| item.tags.split(',').any(|have| have.trim() == *t))
                && visible(k, item)
        });
        let mut total = 0;
        let skip = page_no.saturating_sub(1).saturating_mul(page_size);
        let mut items = Vec::new();
        for (k, item) in matching {
            if total >= skip && items.len() < page_size {
                items.push((k.clone(), item.clone()));
            }
            total += 1;
        }
        Page { total, items }
    }
}
