//! Gray releases of configuration items, as Nacos 2's beta and tag publications and
//! Nacos 3's gray rules hold them: beside an item's formal content, versions for some
//! clients only — by address (`beta`: a list of client IPs) or by label (`tag`: the
//! client's `Vipserver-Tag`, a request's `tag`, or Nacos 3's
//! `nacos.config.gray.label` connection label). A client matching a rule reads and
//! listens to that version; the others the formal one. An item holds one beta and at
//! most [`MAX_GRAYS`] gray versions in all; the beta is matched first, then the tags.
//!
//! Written only by the state machine (`configs::apply`), like the items: every node
//! holds the same gray versions. Each publication and removal is a version in the
//! item's history, named by its gray (`Version::gray`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::history::{record, Op, Version};
use super::{md5_hex, ConfigKey, ConfigRejection, Configs, Retention, State};

/// Most gray versions one item holds (Nacos' default `nacos.config.gray.version.max.count`).
pub const MAX_GRAYS: usize = 10;

/// The name of the beta gray version.
pub const BETA: &str = "beta";

/// What a client is to the gray rules: its address and the tag it carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Client<'a> {
    /// The address requests come from (what `betaIps` lists).
    pub ip: &'a str,
    /// Its tag: a request's `tag`, else its `Vipserver-Tag` (HTTP header or connection
    /// label), else its `nacos.config.gray.label` connection label.
    pub tag: Option<&'a str>,
}

/// Who a gray version is for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rule {
    /// The clients at these addresses.
    Beta {
        /// The addresses, as given (`betaIps`, comma-separated).
        ips: Vec<String>,
    },
    /// The clients carrying this tag.
    Tag {
        /// The tag.
        tag: String,
    },
}

impl Rule {
    /// A beta rule from `betaIps` (comma-separated; blanks dropped); `None` when it names
    /// no address.
    pub fn beta(raw: &str) -> Option<Rule> {
        let mut ips: Vec<String> = raw
            .split(',')
            .map(str::trim)
            .filter(|ip| !ip.is_empty())
            .map(str::to_string)
            .collect();
        ips.sort();
        ips.dedup();
        (!ips.is_empty()).then_some(Rule::Beta { ips })
    }

    /// The gray version's name, as Nacos names it: `beta`, or `tag_<tag>`.
    pub fn name(&self) -> String {
        match self {
            Rule::Beta { .. } => BETA.to_string(),
            Rule::Tag { tag } => format!("tag_{tag}"),
        }
    }

    /// Nacos' rule type: `beta` or `tag`.
    pub fn kind(&self) -> &'static str {
        match self {
            Rule::Beta { .. } => "beta",
            Rule::Tag { .. } => "tag",
        }
    }

    /// Nacos' rule expression: the addresses comma-separated, or the tag.
    pub fn expr(&self) -> String {
        match self {
            Rule::Beta { ips } => ips.join(","),
            Rule::Tag { tag } => tag.clone(),
        }
    }

    /// Nacos' priority: the beta before any tag.
    pub fn priority(&self) -> i64 {
        match self {
            Rule::Beta { .. } => i32::MAX as i64,
            Rule::Tag { .. } => i32::MAX as i64 - 1,
        }
    }

    /// Whether `client` is one the version is for.
    pub fn matches(&self, client: &Client<'_>) -> bool {
        match self {
            Rule::Beta { ips } => !client.ip.is_empty() && ips.iter().any(|ip| ip == client.ip),
            Rule::Tag { tag } => client.tag == Some(tag.as_str()),
        }
    }
}

/// A gray version of an item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gray {
    /// Who it is for.
    pub rule: Rule,
    /// Its content.
    pub content: Arc<str>,
    /// md5 of the content.
    pub md5: String,
    /// When it was first published, ms since the epoch.
    pub created_ms: u64,
    /// When it last changed.
    pub modified_ms: u64,
    /// Who last published it.
    pub by: String,
    /// From where.
    pub src_ip: String,
}

impl Gray {
    /// Its name ([`Rule::name`]).
    pub fn name(&self) -> String {
        self.rule.name()
    }
}

/// A gray publication.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GrayPublish {
    /// The item.
    pub key: ConfigKey,
    /// Who it is for.
    pub rule: Rule,
    /// The content.
    pub content: String,
    /// Compare-and-set: published only when the gray version of that name holds this
    /// md5 (absent: whatever it holds, if it exists at all).
    pub cas_md5: Option<String>,
    /// Who publishes.
    pub by: String,
    /// From where.
    pub src_ip: String,
    /// History retention.
    pub retention: Retention,
}

/// What a client reads of an item: a gray version it matches, else the formal one.
#[derive(Clone, Debug, PartialEq)]
pub struct Served {
    /// The content.
    pub content: Arc<str>,
    /// Its md5.
    pub md5: String,
    /// The item's content type.
    pub r#type: String,
    /// When it last changed.
    pub modified_ms: u64,
    /// The gray version's name, when it is one.
    pub gray: Option<String>,
}

impl Configs {
    /// Publishes a gray version (applied by the state machine): replaces the one of the
    /// same name, or adds it — at most [`MAX_GRAYS`] per item.
    pub fn publish_gray(&self, p: &GrayPublish, at_ms: u64) -> Result<(), ConfigRejection> {
        {
            let mut state = self.0.state.write();
            let name = p.rule.name();
            let grays = state.grays.entry(p.key.clone()).or_default();
            let existing = grays.iter().position(|g| g.name() == name);
            if let Some(cas) = &p.cas_md5 {
                let holds = existing.is_some_and(|i| &grays[i].md5 == cas);
                if !holds {
                    return Err(ConfigRejection::CasMismatch);
                }
            }
            if existing.is_none() && grays.len() >= MAX_GRAYS {
                if grays.is_empty() {
                    state.grays.remove(&p.key);
                }
                return Err(ConfigRejection::TooManyGrays);
            }
            let content: Arc<str> = Arc::from(p.content.as_str());
            let md5 = md5_hex(&p.content);
            let gray = Gray {
                rule: p.rule.clone(),
                content: content.clone(),
                md5: md5.clone(),
                created_ms: existing.map_or(at_ms, |i| grays[i].created_ms),
                modified_ms: at_ms,
                by: p.by.clone(),
                src_ip: p.src_ip.clone(),
            };
            let op = match existing {
                Some(i) => {
                    grays[i] = gray;
                    Op::Update
                }
                None => {
                    grays.push(gray);
                    Op::Insert
                }
            };
            // Matched in priority order, then by name: the same order on every node.
            grays.sort_by(|a, b| (b.rule.priority(), a.name()).cmp(&(a.rule.priority(), b.name())));
            let r#type = state
                .items
                .get(&p.key)
                .map_or_else(|| "text".to_string(), |i| i.r#type.clone());
            state.next_id += 1;
            let version = Version {
                id: state.next_id,
                op,
                content,
                md5,
                r#type,
                app_name: String::new(),
                by: p.by.clone(),
                src_ip: p.src_ip.clone(),
                at_ms,
                gray: Some(name),
            };
            record(&mut state, &p.key, version, p.retention, at_ms);
        }
        self.0.changes.mark([p.key.clone()]);
        Ok(())
    }

    /// Removes gray version `name` of `key` (applied by the state machine); removing what
    /// is not there changes nothing. Returns whether it was there.
    pub fn remove_gray(
        &self,
        key: &ConfigKey,
        name: &str,
        by: &str,
        src_ip: &str,
        retention: Retention,
        at_ms: u64,
    ) -> bool {
        let removed = {
            let mut state = self.0.state.write();
            let removed = take_gray(&mut state, key, name);
            if let Some(gray) = &removed {
                state.next_id += 1;
                let version = deleted(&state, key, gray, state.next_id, by, src_ip, at_ms);
                record(&mut state, key, version, retention, at_ms);
            }
            removed.is_some()
        };
        if removed {
            self.0.changes.mark([key.clone()]);
        }
        removed
    }

    /// The gray versions of `key`, in the order they are matched.
    pub fn grays(&self, key: &ConfigKey) -> Vec<Gray> {
        self.0
            .state
            .read()
            .grays
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    /// Gray version `name` of `key`.
    pub fn gray(&self, key: &ConfigKey, name: &str) -> Option<Gray> {
        let state = self.0.state.read();
        state
            .grays
            .get(key)?
            .iter()
            .find(|g| g.name() == name)
            .cloned()
    }

    /// How many items hold gray versions, and how many they hold in all.
    pub fn gray_counts(&self) -> (usize, usize) {
        let state = self.0.state.read();
        (state.grays.len(), state.grays.values().map(Vec::len).sum())
    }

    /// What `client` reads of `key`: the first gray version it matches, else the formal
    /// content; `None` when neither is there for it.
    pub fn read_for(&self, key: &ConfigKey, client: &Client<'_>) -> Option<Served> {
        let state = self.0.state.read();
        let item = state.items.get(key);
        let r#type = || item.map_or_else(|| "text".to_string(), |i| i.r#type.clone());
        if let Some(gray) = matching(&state, key, client) {
            return Some(Served {
                content: gray.content.clone(),
                md5: gray.md5.clone(),
                r#type: r#type(),
                modified_ms: gray.modified_ms,
                gray: Some(gray.name()),
            });
        }
        item.map(|i| Served {
            content: i.content.clone(),
            md5: i.md5.clone(),
            r#type: i.r#type.clone(),
            modified_ms: i.modified_ms,
            gray: None,
        })
    }

    /// Whether a listener at `client` holding `md5` of `key` (empty: nothing) is behind
    /// what it would read now.
    pub fn is_changed_for(&self, key: &ConfigKey, md5: &str, client: &Client<'_>) -> bool {
        let state = self.0.state.read();
        if let Some(gray) = matching(&state, key, client) {
            return gray.md5 != md5;
        }
        match state.items.get(key) {
            Some(item) => item.md5 != md5,
            None => !md5.is_empty(),
        }
    }
}

/// The first gray version of `key` that `client` matches.
fn matching<'s>(state: &'s State, key: &ConfigKey, client: &Client<'_>) -> Option<&'s Gray> {
    state
        .grays
        .get(key)?
        .iter()
        .find(|g| g.rule.matches(client))
}

/// Takes gray version `name` of `key` out of `state`.
fn take_gray(state: &mut State, key: &ConfigKey, name: &str) -> Option<Gray> {
    let grays = state.grays.get_mut(key)?;
    let at = grays.iter().position(|g| g.name() == name)?;
    let gray = grays.remove(at);
    if grays.is_empty() {
        state.grays.remove(key);
    }
    Some(gray)
}

/// The history version that records `gray`'s removal.
fn deleted(
    state: &State,
    key: &ConfigKey,
    gray: &Gray,
    id: u64,
    by: &str,
    src_ip: &str,
    at_ms: u64,
) -> Version {
    Version {
        id,
        op: Op::Delete,
        content: gray.content.clone(),
        md5: gray.md5.clone(),
        r#type: state
            .items
            .get(key)
            .map_or_else(|| "text".to_string(), |i| i.r#type.clone()),
        app_name: String::new(),
        by: by.to_string(),
        src_ip: src_ip.to_string(),
        at_ms,
        gray: Some(gray.name()),
    }
}

/// Removes every gray version of `key` with the item (a removal of the item removes
/// its gray versions), recording each.
pub(super) fn remove_all(
    state: &mut State,
    key: &ConfigKey,
    by: &str,
    src_ip: &str,
    retention: Retention,
    at_ms: u64,
) -> bool {
    let Some(grays) = state.grays.remove(key) else {
        return false;
    };
    for gray in &grays {
        state.next_id += 1;
        let version = deleted(state, key, gray, state.next_id, by, src_ip, at_ms);
        record(state, key, version, retention, at_ms);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(configs: &Configs, key: &ConfigKey, rule: Rule, content: &str) {
        let p = GrayPublish {
            key: key.clone(),
            rule,
            content: content.into(),
            cas_md5: None,
            by: "nacos".into(),
            src_ip: "127.0.0.1".into(),
            retention: Retention::default(),
        };
        configs.publish_gray(&p, 5).unwrap();
    }

    fn formal(configs: &Configs, key: &ConfigKey, content: &str) {
        let p = super::super::Publish {
            key: key.clone(),
            content: content.into(),
            r#type: Some("yaml".into()),
            app_name: None,
            desc: None,
            tags: None,
            cas_md5: None,
            by: "nacos".into(),
            src_ip: "127.0.0.1".into(),
            retention: Retention::default(),
        };
        configs.publish(&p, 1).unwrap();
    }

    fn at(ip: &str, tag: Option<&'static str>) -> Client<'static> {
        Client {
            ip: Box::leak(ip.to_string().into_boxed_str()),
            tag,
        }
    }

    #[test]
    fn a_client_reads_the_first_gray_version_it_matches_and_the_others_the_formal_one() {
        let configs = Configs::new();
        let key = ConfigKey::new("", "G", "app.yaml");
        formal(&configs, &key, "a: formal");
        publish(
            &configs,
            &key,
            Rule::Tag {
                tag: "canary".into(),
            },
            "a: tag",
        );
        publish(
            &configs,
            &key,
            Rule::beta("127.0.0.2, 127.0.0.3").unwrap(),
            "a: beta",
        );
        let read = |client| configs.read_for(&key, &client).unwrap();
        assert_eq!(&*read(at("127.0.0.1", None)).content, "a: formal");
        assert_eq!(read(at("127.0.0.1", None)).gray, None);
        let beta = read(at("127.0.0.3", Some("canary")));
        assert_eq!(
            (&*beta.content, beta.gray.as_deref()),
            ("a: beta", Some("beta"))
        );
        assert_eq!(beta.r#type, "yaml");
        let tagged = read(at("127.0.0.1", Some("canary")));
        assert_eq!(
            (&*tagged.content, tagged.gray.as_deref()),
            ("a: tag", Some("tag_canary"))
        );
        // Listeners compare against what they would read.
        let formal_md5 = md5_hex("a: formal");
        assert!(!configs.is_changed_for(&key, &formal_md5, &at("127.0.0.1", None)));
        assert!(configs.is_changed_for(&key, &formal_md5, &at("127.0.0.2", None)));
        assert!(!configs.is_changed_for(&key, &md5_hex("a: beta"), &at("127.0.0.2", None)));
        // Stopping the beta: its clients read the tag or the formal content again.
        assert!(configs.remove_gray(&key, BETA, "nacos", "127.0.0.1", Retention::default(), 9));
        assert!(!configs.remove_gray(&key, BETA, "nacos", "127.0.0.1", Retention::default(), 9));
        assert_eq!(&*read(at("127.0.0.2", None)).content, "a: formal");
        // Each publication and removal is in the history, named by its gray version.
        let history = configs.history(&key);
        let grays: Vec<(Op, Option<&str>)> =
            history.iter().map(|v| (v.op, v.gray.as_deref())).collect();
        assert_eq!(
            grays,
            [
                (Op::Delete, Some("beta")),
                (Op::Insert, Some("beta")),
                (Op::Insert, Some("tag_canary")),
                (Op::Insert, None),
            ]
        );
    }

    #[test]
    fn gray_versions_are_bounded_kept_in_snapshots_and_removed_with_their_item() {
        let configs = Configs::new();
        let key = ConfigKey::new("dev", "G", "app.yaml");
        for i in 0..MAX_GRAYS {
            publish(
                &configs,
                &key,
                Rule::Tag {
                    tag: format!("t{i}"),
                },
                "x",
            );
        }
        let one_more = GrayPublish {
            key: key.clone(),
            rule: Rule::Tag { tag: "over".into() },
            content: "x".into(),
            cas_md5: None,
            by: "nacos".into(),
            src_ip: "".into(),
            retention: Retention::default(),
        };
        assert_eq!(
            configs.publish_gray(&one_more, 6),
            Err(ConfigRejection::TooManyGrays)
        );
        // Replacing one is no new one.
        publish(&configs, &key, Rule::Tag { tag: "t0".into() }, "y");
        assert_eq!(configs.gray_counts(), (1, MAX_GRAYS));
        let copy = Configs::new();
        copy.restore(&configs.data());
        assert_eq!(copy.grays(&key), configs.grays(&key));
        assert!(configs.remove(&key, "nacos", "", Retention::default(), 8));
        assert!(configs.grays(&key).is_empty());
        assert_eq!(configs.gray_counts(), (0, 0));
    }

    #[test]
    fn a_beta_names_addresses_and_a_tag_its_label() {
        assert_eq!(Rule::beta(" , "), None);
        let beta = Rule::beta("127.0.0.2,127.0.0.1,127.0.0.2").unwrap();
        assert_eq!(
            (beta.name(), beta.kind(), beta.expr()),
            ("beta".into(), "beta", "127.0.0.1,127.0.0.2".into())
        );
        assert!(!beta.matches(&Client { ip: "", tag: None }));
        let tag = Rule::Tag { tag: "gray".into() };
        assert_eq!(tag.name(), "tag_gray");
        assert!(tag.priority() < beta.priority());
        assert!(!tag.matches(&Client {
            ip: "127.0.0.1",
            tag: Some("other")
        }));
    }
}
