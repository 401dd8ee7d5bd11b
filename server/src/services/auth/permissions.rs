//! Authorization: roles bound to users, permissions granted to roles, and the one check
//! every face calls, [`allowed`].
//!
//! As in Nacos' default auth plugin: a permission is `(role, resource, action)`; the
//! resource is a pattern over `namespaceId:group:naming/serviceName` (configuration
//! items: `namespaceId:group:config/dataId`, stored and matched alike) in which `*`
//! matches any run of characters (the console grants a whole namespace as
//! `namespaceId:*:*`); the action is `r`, `w` or `rw`. Nacos writes the public
//! namespace as an empty prefix (`:*:*`); roster takes that and `public:*:*` alike.
//! `ROLE_ADMIN` is the admins' role and passes every check. A user without a role, or
//! whose roles grant nothing matching, may do nothing.
//!
//! The check reads the Raft-held [`AuthData`] as it is at the time of the call, so a
//! grant or a revocation applies to the next request on every node, without a login.

use serde::{Deserialize, Serialize};

use super::{AuthData, Identity};

/// The admins' role: every user with `admin` set has it, and it passes every check.
pub const ROLE_ADMIN: &str = "ROLE_ADMIN";

/// Nacos' message for a caller without the permission (HTTP 403, gRPC errorCode 403).
pub const DENIED: &str = "authorization failed!";

/// What a request does to what it addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Lists, queries, subscriptions.
    Read,
    /// Registrations, deregistrations, beats, settings.
    Write,
}

/// What a permission grants: Nacos' `r`, `w` or `rw`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Granted {
    /// `r`.
    #[serde(rename = "r")]
    Read,
    /// `w`.
    #[serde(rename = "w")]
    Write,
    /// `rw`.
    #[serde(rename = "rw")]
    ReadWrite,
}

impl Granted {
    /// `r`, `w` or `rw`; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "r" => Some(Self::Read),
            "w" => Some(Self::Write),
            "rw" => Some(Self::ReadWrite),
            _ => None,
        }
    }

    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "r",
            Self::Write => "w",
            Self::ReadWrite => "rw",
        }
    }

    /// Whether it allows `action` (Nacos: the granted string contains the needed one).
    pub fn covers(self, action: Action) -> bool {
        matches!(
            (self, action),
            (Self::ReadWrite, _) | (Self::Read, Action::Read) | (Self::Write, Action::Write)
        )
    }
}

/// One permission of a role: its holders may do `action` on resources matching
/// `resource` (kept per role in [`AuthData::permissions`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Grant {
    /// The resource pattern, as the admin wrote it.
    pub resource: String,
    /// What it grants.
    pub action: Granted,
}

/// What a request addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource<'a> {
    /// One naming service: `namespace:group:naming/name`.
    Service {
        /// Namespace id (`public` for the public namespace).
        namespace: &'a str,
        /// Group.
        group: &'a str,
        /// Service name, without the group.
        name: &'a str,
    },
    /// One configuration item: `namespace:group:config/data_id`.
    Config {
        /// Namespace id.
        namespace: &'a str,
        /// Group.
        group: &'a str,
        /// Data id.
        data_id: &'a str,
    },
    /// Anything in a namespace (what a list of its services or its entry in the
    /// namespace list needs): allowed when some permission could match a resource in it.
    Namespace(&'a str),
}

impl<'a> Resource<'a> {
    /// The naming service `key` names.
    pub fn of_service(key: &'a roster_registry::service::ServiceKey) -> Self {
        Resource::Service {
            namespace: &key.namespace,
            group: &key.group,
            name: &key.name,
        }
    }
}

/// The namespace id Nacos leaves out of resources (`:group:...`).
const PUBLIC: &str = roster_registry::namespace::PUBLIC_NAMESPACE;

/// Whether `identity` may do `action` on `resource` by `data`: an admin always; anyone
/// else when one of their roles holds a permission that covers the action and whose
/// pattern matches the resource.
pub fn allowed(data: &AuthData, identity: &Identity, resource: &Resource, action: Action) -> bool {
    if identity.admin {
        return true;
    }
    let Some(roles) = data.roles.get(&*identity.username) else {
        return false;
    };
    roles.iter().any(|role| {
        data.permissions_of(role)
            .any(|g| g.action.covers(action) && matches(&g.resource, resource))
    })
}

/// Whether the pattern `pattern` matches `resource` (for [`Resource::Namespace`]: could
/// match some resource of that namespace).
pub fn matches(pattern: &str, resource: &Resource) -> bool {
    let (namespace, kind, group, name) = match *resource {
        Resource::Service {
            namespace,
            group,
            name,
        } => (namespace, "naming/", group, name),
        Resource::Config {
            namespace,
            group,
            data_id,
        } => (namespace, "config/", group, data_id),
        Resource::Namespace(namespace) => {
            return match pattern.strip_prefix(':') {
                // Nacos' form of the public namespace.
                Some(_) => namespace == PUBLIC,
                None => glob(pattern.as_bytes(), &Subject::new([namespace, ":"]), true),
            };
        }
    };
    match pattern.strip_prefix(':') {
        Some(rest) => {
            namespace == PUBLIC
                && glob(
                    rest.as_bytes(),
                    &Subject::new([group, ":", kind, name]),
                    false,
                )
        }
        None => glob(
            pattern.as_bytes(),
            &Subject::new([namespace, ":", group, ":", kind, name]),
            false,
        ),
    }
}

/// The string a pattern is matched against, as the pieces it is made of (no copy is
/// made: the list route checks every request of a user who is not an admin).
struct Subject<'a, const N: usize> {
    parts: [&'a str; N],
    len: usize,
}

impl<'a, const N: usize> Subject<'a, N> {
    fn new(parts: [&'a str; N]) -> Self {
        let len = parts.iter().map(|p| p.len()).sum();
        Self { parts, len }
    }

    /// The byte at `i` (< `len`).
    fn at(&self, mut i: usize) -> u8 {
        for part in self.parts {
            if i < part.len() {
                return part.as_bytes()[i];
            }
            i -= part.len();
        }
        unreachable!("index within the subject")
    }
}

/// Glob matching with `*` (any run of bytes, empty included) and nothing else special.
/// With `prefix`, whether the pattern matches some string that *starts with* the
/// subject. The usual linear backtracking to the last `*`: a later `*` can absorb
/// whatever an earlier one could, so going back further never helps.
fn glob<const N: usize>(pattern: &[u8], subject: &Subject<'_, N>, prefix: bool) -> bool {
    let (mut p, mut s) = (0, 0);
    // The last `*` seen and the subject position it currently absorbs up to.
    let mut star: Option<(usize, usize)> = None;
    while s < subject.len {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, s));
            p += 1;
        } else if p < pattern.len() && pattern[p] == subject.at(s) {
            p += 1;
            s += 1;
        } else if let Some((star_p, star_s)) = star {
            // Let the last `*` absorb one more byte and try again after it.
            p = star_p + 1;
            s = star_s + 1;
            star = Some((star_p, s));
        } else {
            return false;
        }
    }
    // The subject is used up: as a prefix anything may follow; as a whole only `*`s
    // may be left of the pattern.
    prefix || pattern[p..].iter().all(|b| *b == b'*')
}

/// Checks a role name: 1 to 64 letters, digits and `_-.@`.
pub fn valid_role(role: &str) -> bool {
    !role.is_empty()
        && role.len() <= 64
        && role
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@'))
}

/// Checks a resource pattern: `namespace:group:type/name` with `*` anywhere, at most
/// 512 bytes, no spaces or control characters. `None` when fine, else what is wrong.
pub fn resource_problem(resource: &str) -> Option<&'static str> {
    if resource.is_empty() || resource.len() > 512 {
        return Some("it should be 1 to 512 characters long.");
    }
    if resource
        .chars()
        .any(|c| c.is_control() || c.is_whitespace())
    {
        return Some("it must not contain spaces or control characters.");
    }
    if resource.matches(':').count() < 2 {
        return Some(
            "it should be namespaceId:group:naming/serviceName (or config/dataId), \
             '*' matching anything, e.g. dev:*:* for the whole namespace dev.",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    fn svc<'a>(namespace: &'a str, group: &'a str, name: &'a str) -> Resource<'a> {
        Resource::Service {
            namespace,
            group,
            name,
        }
    }

    #[test]
    fn patterns_match_whole_resources() {
        let orders = svc("dev", "shop", "orders");
        for yes in [
            "dev:*:*",
            "dev:shop:naming/orders",
            "dev:shop:*",
            "dev:*:naming/*",
            "dev:shop:naming/ord*",
            "*:*:*",
            "*",
            "d*v:*:*rs",
            "dev:**:*",
        ] {
            assert!(matches(yes, &orders), "{yes}");
        }
        for no in [
            "dev:shop:naming/order",
            "dev:shop:naming/orders2",
            "prod:*:*",
            "de:*:*",
            "dev:shop:config/*",
            "dev:other:*",
            "DEV:*:*",
            "dev:shop:naming/x*",
            ":*:*",
        ] {
            assert!(!matches(no, &orders), "{no}");
        }
        // Nothing is special but `*`: a dot is a dot (Nacos' regex would take any byte).
        assert!(!matches("dev:s.op:*", &orders));
        assert!(matches("dev:s.op:*", &svc("dev", "s.op", "x")));
    }

    #[test]
    fn the_public_namespace_is_public_or_an_empty_prefix() {
        let public = svc(PUBLIC, "DEFAULT_GROUP", "orders");
        for yes in [
            ":*:*",
            "public:*:*",
            ":DEFAULT_GROUP:naming/orders",
            "*:*:*",
            "p*:*:*",
        ] {
            assert!(matches(yes, &public), "{yes}");
        }
        assert!(!matches(":*:*", &svc("dev", "g", "s")));
        assert!(!matches(":other:*", &public));
        assert!(matches(":*:*", &Resource::Namespace(PUBLIC)));
        assert!(matches("public:*:*", &Resource::Namespace(PUBLIC)));
        assert!(!matches(":*:*", &Resource::Namespace("dev")));
    }

    #[test]
    fn a_namespace_is_readable_when_a_pattern_could_match_inside_it() {
        let dev = Resource::Namespace("dev");
        for yes in [
            "dev:*:*",
            "dev:shop:naming/orders",
            "*",
            "d*",
            "*:g:naming/x",
            "dev:",
        ] {
            assert!(matches(yes, &dev), "{yes}");
        }
        for no in ["prod:*:*", "dev", "devx:*:*", "de:*:*", "dev2:*"] {
            assert!(!matches(no, &dev), "{no}");
        }
    }

    #[test]
    fn config_resources_match_like_services() {
        let item = Resource::Config {
            namespace: "dev",
            group: "DEFAULT_GROUP",
            data_id: "app.yaml",
        };
        assert!(matches("dev:*:*", &item));
        assert!(matches("dev:*:config/*", &item));
        assert!(matches("dev:DEFAULT_GROUP:config/app.yaml", &item));
        assert!(!matches("dev:*:naming/*", &item));
    }

    #[test]
    fn glob_backtracks_to_the_last_star() {
        let s = |text: &'static str| Subject::new([text]);
        assert!(glob(b"a*b*c", &s("axxbyybzc"), false));
        assert!(!glob(b"a*b*c", &s("axxbyybz"), false));
        assert!(glob(b"*aab", &s("aaab"), false));
        assert!(glob(b"", &s(""), false));
        assert!(!glob(b"", &s("a"), false));
        assert!(glob(b"*", &s(""), false));
        // As a prefix: the rest of the pattern can always be met.
        assert!(glob(b"ab*cd", &s("ab"), true));
        assert!(glob(b"abcd", &s("ab"), true));
        assert!(!glob(b"ax", &s("ab"), true));
        // Across pieces.
        assert!(glob(b"a:b*", &Subject::new(["a", ":", "b", "c"]), false));
    }

    fn user(name: &str) -> Identity {
        Identity {
            username: Cow::Owned(name.to_string()),
            admin: false,
        }
    }

    fn grant(data: &mut AuthData, role: &str, resource: &str, action: Granted) {
        data.permissions
            .entry(role.into())
            .or_default()
            .insert(Grant {
                resource: resource.into(),
                action,
            });
    }

    #[test]
    fn actions_roles_and_admins() {
        let mut data = AuthData::default();
        data.roles
            .entry("ann".into())
            .or_default()
            .extend(["dev-rw".to_string(), "prod-r".to_string()]);
        grant(&mut data, "dev-rw", "dev:*:*", Granted::ReadWrite);
        grant(&mut data, "prod-r", "prod:*:*", Granted::Read);
        grant(&mut data, "ops-w", ":*:*", Granted::Write);
        let ann = user("ann");
        fn check(data: &AuthData, who: &Identity, ns: &str, action: Action) -> bool {
            allowed(data, who, &svc(ns, "g", "s"), action)
        }
        assert!(check(&data, &ann, "dev", Action::Read));
        assert!(check(&data, &ann, "dev", Action::Write));
        assert!(check(&data, &ann, "prod", Action::Read));
        assert!(!check(&data, &ann, "prod", Action::Write));
        // ops-w is granted, but not to ann.
        assert!(!check(&data, &ann, PUBLIC, Action::Write));
        assert!(!check(&data, &ann, PUBLIC, Action::Read));
        assert!(allowed(
            &data,
            &ann,
            &Resource::Namespace("prod"),
            Action::Read
        ));
        assert!(!allowed(
            &data,
            &ann,
            &Resource::Namespace("test"),
            Action::Read
        ));
        // Someone without roles may do nothing; an admin everything.
        assert!(!check(&data, &user("bob"), "dev", Action::Read));
        let admin = Identity {
            username: Cow::Borrowed("nacos"),
            admin: true,
        };
        assert!(check(&data, &admin, "anywhere", Action::Write));
        assert!(allowed(
            &data,
            &admin,
            &Resource::Namespace("x"),
            Action::Read
        ));
        // `w` alone does not read.
        data.roles.get_mut("ann").unwrap().insert("ops-w".into());
        assert!(check(&data, &ann, PUBLIC, Action::Write));
        assert!(!check(&data, &ann, PUBLIC, Action::Read));
    }

    #[test]
    fn granted_actions_parse_and_cover() {
        assert_eq!(Granted::parse("rw"), Some(Granted::ReadWrite));
        assert_eq!(Granted::parse("wr"), None);
        assert_eq!(Granted::parse("R"), None);
        assert!(Granted::Read.covers(Action::Read) && !Granted::Read.covers(Action::Write));
        assert!(Granted::Write.covers(Action::Write) && !Granted::Write.covers(Action::Read));
        assert_eq!(
            serde_json::to_string(&Granted::ReadWrite).unwrap(),
            "\"rw\""
        );
    }

    #[test]
    fn resources_and_roles_are_checked() {
        assert_eq!(resource_problem("dev:*:*"), None);
        assert_eq!(resource_problem(":*:*"), None);
        assert_eq!(resource_problem("dev:g:naming/a:b"), None);
        assert!(resource_problem("dev").is_some());
        assert!(resource_problem("dev:*").is_some());
        assert!(resource_problem("").is_some());
        assert!(resource_problem("dev:*:a b").is_some());
        assert!(resource_problem(&format!("dev:*:{}", "x".repeat(600))).is_some());
        assert!(valid_role("dev-rw") && valid_role(ROLE_ADMIN));
        assert!(!valid_role("") && !valid_role("a b") && !valid_role(&"r".repeat(65)));
    }
}
