//! Authentication and authorization: users with argon2 password hashes, HS256 tokens
//! signed with a key generated per cluster (and rotated on demand), a bound on
//! concurrent password checks and a short-lived cache of their outcomes; roles and the
//! permissions granted to them.
//!
//! Users, roles, permissions, token generations and the signing keys are Raft data
//! ([`AuthData`]); the state machine replaces them here when a command commits, and
//! every node verifies tokens and checks permissions locally, against the data as it
//! is at that moment.
//! Modules: [`token`] token encoding, [`password`] hashing, its bound and the cache,
//! [`permissions`] roles, permissions and the one authorization check, [`throttle`]
//! login throttling per user and source address, [`writes`] the auth commands as every
//! face proposes them, [`apply`] how the state machine applies them.

pub mod api_tokens;
pub mod apply;
pub mod password;
pub mod permissions;
pub mod throttle;
pub mod token;
pub mod writes;

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use password::{CredentialCache, PasswordChecks};
use permissions::{Action, Grant, Resource, ROLE_ADMIN};
use roster_registry::clock::now_ms;
use throttle::{Attempt, Throttle};

/// The user created at bootstrap, named as in Nacos so existing client configs keep
/// their username.
pub const ADMIN_USERNAME: &str = "nacos";

/// How long a token lives, in seconds (Nacos' default).
pub const DEFAULT_TOKEN_TTL_SECS: u64 = 18_000;

/// A stored user.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// PHC-format argon2 hash.
    pub password_hash: String,
    /// Whether the user is an admin (holds `ROLE_ADMIN`): may do anything, manage
    /// users, roles, permissions, namespaces, members, sync tasks and keys.
    pub admin: bool,
}

/// Most retired keys kept at once; a rotation beyond it forgets the oldest. Rotations
/// are rare admin acts: this only bounds a script gone wrong.
pub const MAX_RETIRED_KEYS: usize = 8;

/// The Raft-held auth state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthData {
    /// The token signing key; `None` until the cluster is bootstrapped.
    #[serde(with = "serde_bytes_opt")]
    pub signing_key: Option<Vec<u8>>,
    /// Users by name.
    pub users: BTreeMap<String, User>,
    /// Keys replaced by rotations that still verify the tokens they signed, oldest
    /// first (absent in snapshots of builds before rotation).
    #[serde(default)]
    pub retired_keys: Vec<RetiredKey>,
    /// The roles of each user, by user name, `ROLE_ADMIN` aside (that is `User::admin`).
    /// Absent in snapshots of builds before roles, as are the next two.
    #[serde(default)]
    pub roles: BTreeMap<String, BTreeSet<String>>,
    /// The permissions granted to each role, by role.
    #[serde(default)]
    pub permissions: BTreeMap<String, BTreeSet<Grant>>,
    /// Each user's token generation: a token counts only while it carries the current
    /// one. Moved on by a password change, a change of the user's roles and the user's
    /// deletion; kept after a deletion, so that a user created again under the same
    /// name does not bring back the old tokens. Missing means 0.
    #[serde(default)]
    pub token_generations: BTreeMap<String, u64>,
    /// Long-lived API tokens, by id (absent in snapshots of builds before them).
    #[serde(default)]
    pub api_tokens: BTreeMap<String, api_tokens::ApiToken>,
}

/// A signing key replaced by a rotation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetiredKey {
    /// The key.
    #[serde(with = "serde_bytes")]
    pub key: Vec<u8>,
    /// Unix time (seconds) until which the key verifies tokens, and the latest expiry
    /// a token it verifies may carry: the rotation's time plus a token lifetime.
    pub valid_until_secs: u64,
}

impl AuthData {
    /// Replaces the signing key with `key` at `at_ms`. The replaced key keeps verifying
    /// tokens that expire within `keep_previous_secs` of the rotation; with 0 it is
    /// dropped with every older key, and every token signed before stops working.
    /// Keys whose window has passed are forgotten. Refused before bootstrap (`false`):
    /// a key alone would make the cluster look bootstrapped without an admin.
    pub fn rotate(&mut self, key: Vec<u8>, keep_previous_secs: u64, at_ms: u64) -> bool {
        let Some(previous) = self.signing_key.take() else {
            return false;
        };
        self.signing_key = Some(key);
        // Rounded up: a token issued in the rotation's second expires within the window.
        let at_secs = at_ms.div_ceil(1000);
        if keep_previous_secs == 0 {
            self.retired_keys.clear();
            return true;
        }
        self.retired_keys.retain(|k| k.valid_until_secs > at_secs);
        self.retired_keys.push(RetiredKey {
            key: previous,
            valid_until_secs: at_secs + keep_previous_secs,
        });
        let excess = self.retired_keys.len().saturating_sub(MAX_RETIRED_KEYS);
        self.retired_keys.drain(..excess);
        true
    }

    /// The permissions granted to `role`.
    pub fn permissions_of<'a>(&'a self, role: &str) -> impl Iterator<Item = &'a Grant> + 'a {
        self.permissions.get(role).into_iter().flatten()
    }

    /// `username`'s current token generation.
    pub fn token_generation(&self, username: &str) -> u64 {
        self.token_generations.get(username).copied().unwrap_or(0)
    }

    /// Ends every token `username` holds: they carry an older generation from now on.
    pub fn revoke_tokens(&mut self, username: &str) {
        *self
            .token_generations
            .entry(username.to_string())
            .or_insert(0) += 1;
    }

    /// Every `(role, username)` binding, sorted: the admins with `ROLE_ADMIN`, and the
    /// roles bound through the API.
    pub fn role_bindings(&self) -> Vec<(&str, &str)> {
        let mut bindings: Vec<(&str, &str)> = self
            .users
            .iter()
            .filter(|(_, user)| user.admin)
            .map(|(name, _)| (ROLE_ADMIN, name.as_str()))
            .chain(self.roles.iter().flat_map(|(user, roles)| {
                roles.iter().map(move |role| (role.as_str(), user.as_str()))
            }))
            .collect();
        bindings.sort_unstable();
        bindings
    }

    /// Whether any user holds `role` (`ROLE_ADMIN`: always, an admin exists).
    pub fn role_exists(&self, role: &str) -> bool {
        role == ROLE_ADMIN || self.roles.values().any(|roles| roles.contains(role))
    }

    /// The user name and generation `token` carries, if a current or retired key signed
    /// it and it has not expired (whether the generation is current is the caller's
    /// question).
    pub fn verify_token(&self, token: &str, now_secs: u64) -> Result<token::Verified, AuthError> {
        let key = self
            .signing_key
            .as_deref()
            .ok_or(AuthError::NotBootstrapped)?;
        match token::verify(key, token, now_secs) {
            // Not the current key's: perhaps a retired one's (rare; HMACs are cheap).
            Err(AuthError::InvalidToken) => {}
            verdict => return verdict,
        }
        for retired in self.retired_keys.iter().rev() {
            match token::verify_retired(&retired.key, token, now_secs, retired.valid_until_secs) {
                Err(AuthError::InvalidToken) => continue,
                verdict => return verdict,
            }
        }
        Err(AuthError::InvalidToken)
    }
}

mod serde_bytes_opt {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref()
            .map(|b| serde_bytes::ByteBuf::from(b.clone()))
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        Ok(Option::<serde_bytes::ByteBuf>::deserialize(d)?.map(|b| b.into_vec()))
    }
}

/// Who a request comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The user name (borrowed for the built-in anonymous caller: no allocation per
    /// request when authentication is off).
    pub username: Cow<'static, str>,
    /// Whether the user is an admin.
    pub admin: bool,
}

/// Why a request could not be authenticated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No token and no username/password.
    #[error("authentication required: pass accessToken, an Authorization: Bearer token, or username and password")]
    Missing,
    /// Unknown user or wrong password (Nacos' wording).
    #[error("user not found!")]
    BadCredentials,
    /// The token is malformed or its signature is wrong.
    #[error("token invalid!")]
    InvalidToken,
    /// The token's lifetime is over.
    #[error("token expired!")]
    ExpiredToken,
    /// The cluster has no signing key yet.
    #[error("server is starting, please try again later")]
    NotBootstrapped,
    /// Every password-check permit stayed busy for the whole wait.
    #[error("Too many password checks; retry shortly")]
    TooManyChecks,
    /// This user failed too often from this address: it waits (login throttling).
    #[error(
        "too many failed logins for this user from this address; retry in {retry_after_secs} s"
    )]
    Throttled {
        /// Seconds left to wait.
        retry_after_secs: u64,
    },
    /// A password check's thread ended without an answer (the node is stopping).
    #[error("the password check was interrupted; retry")]
    Interrupted,
}

/// The credentials a request carries.
#[derive(Clone, Debug, Default)]
pub struct Credentials<'a> {
    /// `Authorization: Bearer` value or `accessToken` parameter.
    pub token: Option<&'a str>,
    /// `username` parameter.
    pub username: Option<&'a str>,
    /// `password` parameter.
    pub password: Option<&'a str>,
}

/// Authentication handle. Cheap to clone.
#[derive(Clone)]
pub struct Auth {
    shared: Arc<Shared>,
}

struct Shared {
    /// Whether requests must authenticate (`--no-auth` turns it off).
    enabled: bool,
    /// Token lifetime, seconds.
    token_ttl_secs: u64,
    /// Users and key, replaced whole by the state machine.
    data: ArcSwap<AuthData>,
    /// Outcomes of recent password checks.
    cache: CredentialCache,
    /// The bound on argon2 computations running at once.
    checks: PasswordChecks,
    /// Failed checks per user and source address, and the waits they impose.
    throttle: Throttle,
    /// How many times `data` was replaced: moved on after each replacement, so that
    /// whoever sees a new revision also sees the data that came with it.
    revision: watch::Sender<u64>,
}

/// A token handed out at login.
#[derive(Clone, Debug)]
pub struct IssuedToken {
    /// The token.
    pub token: String,
    /// Its lifetime in seconds.
    pub ttl_secs: u64,
    /// Whether the user is an admin.
    pub admin: bool,
}

/// What an unknown user's password is checked against: an argon2id hash with the cost
/// of roster's own (of a random password, thrown away), so that a login for a name that
/// does not exist takes as long as one for a name that does.
const DUMMY_HASH: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$cm9zdGVyLWR1bW15LXNsdA$6RwZ8uyjwSCZlpDgkbpJRFKZqN4CcVlIiqbsEKI2ATI";

impl Auth {
    /// An auth handle with no users yet, as many password checks at once as cores.
    pub fn new(enabled: bool, token_ttl_secs: u64) -> Self {
        Self::with_password_checks(enabled, token_ttl_secs, PasswordChecks::default_max())
    }

    /// An auth handle with no users yet and at most `max_password_checks` argon2
    /// computations at once (`--max-password-checks`).
    pub fn with_password_checks(
        enabled: bool,
        token_ttl_secs: u64,
        max_password_checks: usize,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                enabled,
                token_ttl_secs,
                data: ArcSwap::from_pointee(AuthData::default()),
                cache: CredentialCache::new(),
                checks: PasswordChecks::new(max_password_checks),
                throttle: Throttle::new(),
                revision: watch::Sender::new(0),
            }),
        }
    }

    /// How long tokens issued here live, seconds.
    pub fn token_ttl_secs(&self) -> u64 {
        self.shared.token_ttl_secs
    }

    /// Whether requests must authenticate.
    pub fn enabled(&self) -> bool {
        self.shared.enabled
    }

    /// The current users and key.
    pub fn data(&self) -> Arc<AuthData> {
        self.shared.data.load_full()
    }

    /// Replaces users and key (the state machine calls this on commit), then moves the
    /// revision on.
    pub fn set_data(&self, data: AuthData) {
        self.shared.data.store(Arc::new(data));
        self.shared.revision.send_modify(|r| *r += 1);
    }

    /// A receiver that sees each new revision of the auth data (a committed user, role
    /// or permission change, or a snapshot): what long-lived subscriptions are checked
    /// again on.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.shared.revision.subscribe()
    }

    /// How many times the auth data was replaced so far.
    pub fn revision(&self) -> u64 {
        *self.shared.revision.borrow()
    }

    /// Whether the cluster has a signing key and an admin.
    pub fn bootstrapped(&self) -> bool {
        self.shared.data.load().signing_key.is_some()
    }

    /// Checks `username`/`password` and issues a token (of the user's current token
    /// generation).
    pub async fn login(
        &self,
        username: &str,
        password: &str,
        now_secs: u64,
    ) -> Result<IssuedToken, AuthError> {
        let identity = self.check_password(username, password).await?;
        let data = self.data();
        let key = data
            .signing_key
            .as_deref()
            .ok_or(AuthError::NotBootstrapped)?;
        let expires = now_secs + self.shared.token_ttl_secs;
        Ok(IssuedToken {
            token: token::issue(key, username, expires, data.token_generation(username)),
            ttl_secs: self.shared.token_ttl_secs,
            admin: identity.admin,
        })
    }

    /// Works out who sent a request: a token wins over username/password.
    pub async fn identify(
        &self,
        creds: &Credentials<'_>,
        now_secs: u64,
    ) -> Result<Identity, AuthError> {
        if let Some(t) = creds.token.filter(|t| !t.is_empty()) {
            let data = self.data();
            if let Some((id, secret)) = api_tokens::parse(t) {
                // An API token acts as its user while both exist.
                let (username, user) = data
                    .api_tokens
                    .get(id)
                    .filter(|token| api_tokens::proves(token, secret))
                    .and_then(|token| data.users.get_key_value(&token.user))
                    .ok_or(AuthError::InvalidToken)?;
                return Ok(Identity {
                    admin: user.admin,
                    username: Cow::Owned(username.clone()),
                });
            }
            let verified = data.verify_token(t, now_secs)?;
            // A deleted user's tokens stop working at once, and so do the ones issued
            // before a password or role change (an older generation).
            let user = data
                .users
                .get(&verified.username)
                .filter(|_| verified.generation == data.token_generation(&verified.username))
                .ok_or(AuthError::InvalidToken)?;
            return Ok(Identity {
                admin: user.admin,
                username: Cow::Owned(verified.username),
            });
        }
        match (creds.username, creds.password) {
            (Some(u), Some(p)) if !u.is_empty() => self.check_password(u, p).await,
            _ => Err(AuthError::Missing),
        }
    }

    /// Checks a password: from the cache when the same pair was checked recently,
    /// else with argon2 under a permit (`TooManyChecks` when none frees in time).
    /// Throttled per user and source address (`Throttled`, see [`throttle`]); an unknown
    /// user costs what a known one does.
    pub async fn check_password(
        &self,
        username: &str,
        password: &str,
    ) -> Result<Identity, AuthError> {
        // Login throttling: a pair waiting out its failures is refused before any work,
        // whatever its password.
        let throttle = &self.shared.throttle;
        let attempt = Attempt::new(username, throttle::source());
        let admit = || {
            throttle
                .admit(&attempt, now_ms())
                .map_err(|retry_after_secs| AuthError::Throttled { retry_after_secs })
        };
        admit()?;
        let data = self.data();
        let user = data.users.get(username);
        // An unknown user is checked against a fixed hash of the same cost, cached and
        // counted the same way, so the time an answer takes does not tell which names
        // exist.
        let stored = user.map_or(DUMMY_HASH, |u| u.password_hash.as_str());
        let cache = &self.shared.cache;
        let pair = cache.digest(username, password);
        let passed = match cache.outcome(&pair, stored) {
            Some(passed) => passed,
            None => {
                let permit = self.shared.checks.permit().await?;
                // Again: a burst of guesses that passed the first look waits here, and
                // the failures meanwhile may have started a wait.
                admit()?;
                // A request with the same pair may have checked it while this one
                // waited: a flood of one wrong password costs one hash.
                match cache.outcome(&pair, stored) {
                    Some(passed) => passed,
                    None => {
                        let shared = self.shared.clone();
                        let hash = stored.to_string();
                        let candidate = password.to_string();
                        // Remembered on the check thread: the outcome counts even
                        // if this request is gone by then.
                        permit
                            .run(move |scratch| {
                                let passed = password::verify_in(scratch, &candidate, &hash);
                                shared.cache.remember(pair, &hash, passed);
                                passed
                            })
                            .await?
                    }
                }
            }
        };
        let user = user.filter(|_| passed);
        throttle.record(&attempt, user.is_some(), now_ms());
        let Some(user) = user else {
            return Err(AuthError::BadCredentials);
        };
        Ok(Identity {
            username: Cow::Owned(username.to_string()),
            admin: user.admin,
        })
    }

    /// Whether `identity` may do `action` on `resource`, by the auth data as it is now
    /// (see [`permissions::allowed`]; everyone may do everything with auth off).
    pub fn allowed(&self, identity: &Identity, resource: &Resource, action: Action) -> bool {
        if !self.shared.enabled || identity.admin {
            return true;
        }
        permissions::allowed(&self.shared.data.load(), identity, resource, action)
    }

    /// `username`'s current token generation, `None` if there is no such user: a
    /// long-lived stream compares it with the one it started with to end itself when
    /// its caller's tokens are revoked.
    pub fn token_generation(&self, username: &str) -> Option<u64> {
        let data = self.shared.data.load();
        data.users
            .contains_key(username)
            .then(|| data.token_generation(username))
    }

    /// Who subscribes as `identity`, to check the subscription again later with
    /// [`Reader::still_reads`]; `None` with auth off (nothing is ever revoked).
    pub fn reader(&self, identity: &Identity) -> Option<Reader> {
        if !self.shared.enabled {
            return None;
        }
        Some(Reader {
            auth: self.clone(),
            // Whether the user is an admin is looked up at each check: it may change.
            identity: Identity {
                username: identity.username.clone(),
                admin: false,
            },
            generation: self.token_generation(&identity.username),
        })
    }

    /// Hashes a new password under a permit, like a check.
    pub async fn hash_password(&self, password: &str) -> Result<String, AuthError> {
        let permit = self.shared.checks.permit().await?;
        let password = password.to_string();
        permit
            .run(move |scratch| password::hash_in(scratch, &password))
            .await
    }
}

/// Who holds a long-lived subscription (a gRPC subscription, a UDP push target): the
/// user and their token generation when they subscribed, checked against the auth data
/// as it is now whenever it changes. Made by [`Auth::reader`]; an event stream lasts
/// while its caller's [`Reader::signed_in`] holds.
#[derive(Clone)]
pub struct Reader {
    auth: Auth,
    /// The user, never marked admin (see [`Reader::still_reads`]).
    identity: Identity,
    /// Their token generation when they subscribed (`None`: no such user by then).
    generation: Option<u64>,
}

impl Reader {
    /// Whether the subscriber may still read `resource`: the user still exists, their
    /// tokens were not ended since (no password or role change, no deletion), and they
    /// are an admin or one of their roles grants them read on it, as the data is now.
    pub fn still_reads(&self, resource: &Resource) -> bool {
        let data = self.auth.shared.data.load();
        self.user_in(&data).is_some_and(|user| {
            user.admin || permissions::allowed(&data, &self.identity, resource, Action::Read)
        })
    }

    /// Whether the user still exists and their tokens were not ended since (no
    /// password or role change, no deletion): what an event stream lasts for.
    pub fn signed_in(&self) -> bool {
        self.user_in(&self.auth.shared.data.load()).is_some()
    }

    /// The user in `data`, if they exist there with the token generation they
    /// subscribed with.
    fn user_in<'d>(&self, data: &'d AuthData) -> Option<&'d User> {
        let username = &*self.identity.username;
        let user = data.users.get(username)?;
        (self.generation == Some(data.token_generation(username))).then_some(user)
    }

    /// The revision of the auth data now (see [`Auth::revision`]): a check that passed
    /// at one revision holds until the next.
    pub fn revision(&self) -> u64 {
        self.auth.revision()
    }

    /// Whether `other` is the same user with the same token generation.
    pub fn same_as(&self, other: &Reader) -> bool {
        self.identity == other.identity && self.generation == other.generation
    }
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("username", &self.identity.username)
            .field("generation", &self.generation)
            .finish()
    }
}

/// An authentication failure as a client sees it.
impl From<AuthError> for crate::error::Error {
    fn from(e: AuthError) -> Self {
        use crate::error::ErrorKind;
        let kind = match e {
            AuthError::Missing => ErrorKind::Unauthenticated,
            AuthError::NotBootstrapped | AuthError::Interrupted => ErrorKind::Unavailable,
            AuthError::Throttled { retry_after_secs } => {
                return Self::too_many_requests(e.to_string(), retry_after_secs)
            }
            AuthError::TooManyChecks => {
                // Checks free within the longest a caller waits for one.
                let wait = password::CHECK_WAIT.as_secs();
                return Self::too_many_requests(e.to_string(), wait);
            }
            AuthError::BadCredentials | AuthError::InvalidToken | AuthError::ExpiredToken => {
                ErrorKind::Forbidden
            }
        };
        Self::new(kind, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth_with_admin(password: &str) -> Auth {
        let auth = Auth::new(true, 100);
        let mut data = AuthData {
            signing_key: Some(vec![7; 32]),
            ..Default::default()
        };
        data.users.insert(
            ADMIN_USERNAME.into(),
            User {
                password_hash: password::hash(password),
                admin: true,
            },
        );
        auth.set_data(data);
        auth
    }

    #[tokio::test]
    async fn login_then_use_token() {
        let auth = auth_with_admin("s3cret");
        assert_eq!(
            auth.login("nacos", "wrong", 0).await.unwrap_err(),
            AuthError::BadCredentials
        );
        assert_eq!(
            auth.login("nobody", "s3cret", 0).await.unwrap_err(),
            AuthError::BadCredentials
        );
        let t = auth.login("nacos", "s3cret", 1_000).await.unwrap();
        let creds = Credentials {
            token: Some(&t.token),
            ..Default::default()
        };
        assert!(auth.identify(&creds, 1_050).await.unwrap().admin);
        assert_eq!(
            auth.identify(&creds, 1_101).await.unwrap_err(),
            AuthError::ExpiredToken
        );
        assert_eq!(
            auth.identify(&Credentials::default(), 0).await.unwrap_err(),
            AuthError::Missing
        );
    }

    #[tokio::test]
    async fn password_change_invalidates_the_cache_and_deletion_the_token() {
        let auth = auth_with_admin("one");
        let creds = Credentials {
            username: Some("nacos"),
            password: Some("one"),
            ..Default::default()
        };
        auth.identify(&creds, 0).await.unwrap();
        let t = auth.login("nacos", "one", 0).await.unwrap();
        // "two" fails now, and the failure is remembered against the current hash.
        assert_eq!(
            auth.login("nacos", "two", 0).await.unwrap_err(),
            AuthError::BadCredentials
        );
        let mut data = AuthData::clone(&auth.data());
        data.users.get_mut("nacos").unwrap().password_hash = password::hash("two");
        auth.set_data(data.clone());
        assert_eq!(
            auth.identify(&creds, 0).await.unwrap_err(),
            AuthError::BadCredentials
        );
        auth.login("nacos", "two", 0).await.unwrap();
        data.users.clear();
        auth.set_data(data);
        let by_token = Credentials {
            token: Some(&t.token),
            ..Default::default()
        };
        assert_eq!(
            auth.identify(&by_token, 1).await.unwrap_err(),
            AuthError::InvalidToken
        );
    }

    #[tokio::test]
    async fn a_token_of_an_older_generation_is_refused() {
        let auth = auth_with_admin("one");
        let old = auth.login("nacos", "one", 0).await.unwrap();
        fn by(t: &IssuedToken) -> Credentials<'_> {
            Credentials {
                token: Some(&t.token),
                ..Default::default()
            }
        }
        assert_eq!(auth.identify(&by(&old), 1).await.unwrap().username, "nacos");
        let mut data = AuthData::clone(&auth.data());
        data.revoke_tokens("nacos");
        auth.set_data(data);
        assert_eq!(auth.token_generation("nacos"), Some(1));
        assert_eq!(auth.token_generation("nobody"), None);
        assert_eq!(
            auth.identify(&by(&old), 1).await.unwrap_err(),
            AuthError::InvalidToken
        );
        let fresh = auth.login("nacos", "one", 0).await.unwrap();
        assert!(auth.identify(&by(&fresh), 1).await.unwrap().admin);
    }

    #[test]
    fn a_reader_reads_while_its_grant_and_its_tokens_last() {
        let auth = auth_with_admin("one");
        let mut data = AuthData::clone(&auth.data());
        let user = User {
            password_hash: String::new(),
            admin: false,
        };
        data.users.insert("ann".into(), user);
        data.roles
            .entry("ann".into())
            .or_default()
            .insert("dev".into());
        let grant = Grant {
            resource: "dev:*:*".into(),
            action: permissions::Granted::Read,
        };
        data.permissions
            .entry("dev".into())
            .or_default()
            .insert(grant);
        auth.set_data(data.clone());
        let ann = Identity {
            username: Cow::Borrowed("ann"),
            admin: false,
        };
        let service = |namespace| Resource::Service {
            namespace,
            group: "g",
            name: "s",
        };
        let reader = auth.reader(&ann).unwrap();
        assert!(reader.signed_in());
        assert!(reader.still_reads(&service("dev")));
        assert!(!reader.still_reads(&service("prod")));
        let changes = auth.changes();
        let before = reader.revision();
        // The grant taken back, then given again: the same reader follows it.
        let mut revoked = data.clone();
        revoked.permissions.clear();
        auth.set_data(revoked);
        assert!(changes.has_changed().unwrap());
        assert_eq!(reader.revision(), before + 1);
        assert!(!reader.still_reads(&service("dev")));
        auth.set_data(data.clone());
        assert!(reader.still_reads(&service("dev")));
        // Made an admin: reads anything.
        data.users.get_mut("ann").unwrap().admin = true;
        auth.set_data(data.clone());
        assert!(reader.still_reads(&service("prod")));
        // Its tokens ended: no longer, though a new subscription would.
        data.users.get_mut("ann").unwrap().admin = false;
        data.revoke_tokens("ann");
        auth.set_data(data.clone());
        assert!(!reader.still_reads(&service("dev")) && !reader.signed_in());
        let again = auth.reader(&ann).unwrap();
        assert!(again.still_reads(&service("dev")) && !again.same_as(&reader));
        // Deleted: no longer.
        data.users.remove("ann");
        auth.set_data(data);
        assert!(!again.still_reads(&service("dev")) && !again.signed_in());
        assert!(Auth::new(false, 100).reader(&ann).is_none());
    }

    #[test]
    fn bindings_list_admins_with_role_admin() {
        let mut data = AuthData::default();
        for (name, admin) in [("nacos", true), ("ann", false)] {
            data.users.insert(
                name.into(),
                User {
                    password_hash: String::new(),
                    admin,
                },
            );
        }
        data.roles
            .entry("ann".into())
            .or_default()
            .extend(["dev".to_string(), "a-first".to_string()]);
        assert_eq!(
            data.role_bindings(),
            vec![("ROLE_ADMIN", "nacos"), ("a-first", "ann"), ("dev", "ann")]
        );
        assert!(data.role_exists("dev") && data.role_exists(ROLE_ADMIN));
        assert!(!data.role_exists("prod"));
    }

    #[test]
    fn with_auth_off_everything_is_allowed() {
        let off = Auth::new(false, 100);
        let nobody = Identity {
            username: Cow::Borrowed("anonymous"),
            admin: false,
        };
        let r = Resource::Namespace("dev");
        assert!(off.allowed(&nobody, &r, Action::Write));
        assert!(!Auth::new(true, 100).allowed(&nobody, &r, Action::Read));
    }

    #[test]
    fn rotation_keeps_the_previous_key_for_one_token_lifetime() {
        let mut data = AuthData::default();
        assert!(
            !data.rotate(vec![1; 32], 100, 0),
            "no rotation before bootstrap"
        );
        assert_eq!(data.signing_key, None);
        data.signing_key = Some(b"k1".to_vec());
        let old = token::issue(b"k1", "nacos", 1_090, 0);
        assert!(data.rotate(b"k2".to_vec(), 100, 999_500));
        let new = token::issue(b"k2", "nacos", 1_140, 0);
        // The rotation's second rounded up: the window ends at 1_000 + 100.
        assert_eq!(data.retired_keys[0].valid_until_secs, 1_100);
        let user = |t: &str, now| data.verify_token(t, now).map(|v| v.username);
        assert_eq!(user(&old, 1_050).unwrap(), "nacos");
        assert_eq!(user(&new, 1_050).unwrap(), "nacos");
        assert_eq!(
            data.verify_token(&old, 1_090).unwrap_err(),
            AuthError::ExpiredToken
        );
        let forged = token::issue(b"k1", "nacos", 5_000, 0);
        assert_eq!(
            data.verify_token(&forged, 1_050).unwrap_err(),
            AuthError::InvalidToken
        );
        // A second rotation within the window keeps both older keys; one after it
        // forgets k1.
        assert!(data.rotate(b"k3".to_vec(), 100, 1_050_000));
        let user = |t: &str, now| data.verify_token(t, now).map(|v| v.username);
        assert_eq!(user(&old, 1_060).unwrap(), "nacos");
        assert_eq!(user(&new, 1_060).unwrap(), "nacos");
        assert!(data.rotate(b"k4".to_vec(), 100, 1_120_000));
        let keys: Vec<_> = data.retired_keys.iter().map(|k| k.key.clone()).collect();
        assert_eq!(keys, vec![b"k2".to_vec(), b"k3".to_vec()]);
        // Dropping the previous key drops them all.
        assert!(data.rotate(b"k5".to_vec(), 0, 1_130_000));
        assert!(data.retired_keys.is_empty());
        assert_eq!(
            data.verify_token(&new, 1_131).unwrap_err(),
            AuthError::InvalidToken
        );
        for n in 0..20u8 {
            data.rotate(vec![n], 100, 1_140_000);
        }
        assert_eq!(data.retired_keys.len(), MAX_RETIRED_KEYS);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_one_wrong_password_costs_one_hash() {
        let auth = auth_with_admin("right-one");
        // One permit, taken: a check that misses the cache has to wait for it.
        let auth_one = Auth::with_password_checks(true, 100, 1);
        auth_one.set_data(AuthData::clone(&auth.data()));
        assert_eq!(
            auth_one.login("nacos", "wrong", 0).await.unwrap_err(),
            AuthError::BadCredentials
        );
        let held = auth_one.shared.checks.permit().await.unwrap();
        // Remembered: answered without a permit, at once.
        assert_eq!(
            auth_one.login("nacos", "wrong", 0).await.unwrap_err(),
            AuthError::BadCredentials
        );
        // Another password waits for the permit, two seconds at most, then gets 429.
        assert_eq!(
            auth_one.login("nacos", "wrong-2", 0).await.unwrap_err(),
            AuthError::TooManyChecks
        );
        drop(held);
        auth_one.login("nacos", "right-one", 0).await.unwrap();
    }
}
