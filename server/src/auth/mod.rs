//! Authentication: users with argon2 password hashes, HS256 tokens signed with a key
//! generated per cluster, and a short-lived cache of successful password checks.
//!
//! Users and the signing key are Raft data ([`AuthData`]); the state machine replaces
//! them here when a command commits, and every node verifies tokens locally.
//! Modules: [`token`] token encoding, [`password`] hashing and the check cache.

pub mod password;
pub mod token;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};

use password::CredentialCache;

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
    /// Whether the user may manage users and namespaces.
    pub admin: bool,
}

/// The Raft-held auth state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthData {
    /// The token signing key; `None` until the cluster is bootstrapped.
    #[serde(with = "serde_bytes_opt")]
    pub signing_key: Option<Vec<u8>>,
    /// Users by name.
    pub users: BTreeMap<String, User>,
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
    /// Recent successful password checks.
    cache: CredentialCache,
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

impl Auth {
    /// An auth handle with no users yet.
    pub fn new(enabled: bool, token_ttl_secs: u64) -> Self {
        Self {
            shared: Arc::new(Shared {
                enabled,
                token_ttl_secs,
                data: ArcSwap::from_pointee(AuthData::default()),
                cache: CredentialCache::new(),
            }),
        }
    }

    /// Whether requests must authenticate.
    pub fn enabled(&self) -> bool {
        self.shared.enabled
    }

    /// The current users and key.
    pub fn data(&self) -> Arc<AuthData> {
        self.shared.data.load_full()
    }

    /// Replaces users and key (the state machine calls this on commit).
    pub fn set_data(&self, data: AuthData) {
        self.shared.data.store(Arc::new(data));
    }

    /// Whether the cluster has a signing key and an admin.
    pub fn bootstrapped(&self) -> bool {
        self.shared.data.load().signing_key.is_some()
    }

    /// Checks `username`/`password` and issues a token.
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
        Ok(IssuedToken {
            token: token::issue(key, username, now_secs + self.shared.token_ttl_secs),
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
            let key = data
                .signing_key
                .as_deref()
                .ok_or(AuthError::NotBootstrapped)?;
            let username = token::verify(key, t, now_secs)?;
            // A deleted user's tokens stop working at once.
            let user = data.users.get(&username).ok_or(AuthError::InvalidToken)?;
            return Ok(Identity {
                username: Cow::Owned(username),
                admin: user.admin,
            });
        }
        match (creds.username, creds.password) {
            (Some(u), Some(p)) if !u.is_empty() => self.check_password(u, p).await,
            _ => Err(AuthError::Missing),
        }
    }

    /// Checks a password, from the cache when the same pair succeeded recently.
    pub async fn check_password(
        &self,
        username: &str,
        password: &str,
    ) -> Result<Identity, AuthError> {
        let data = self.data();
        let user = data.users.get(username).ok_or(AuthError::BadCredentials)?;
        let identity = Identity {
            username: Cow::Owned(username.to_string()),
            admin: user.admin,
        };
        if self
            .shared
            .cache
            .hit(username, password, &user.password_hash)
        {
            return Ok(identity);
        }
        let hash = user.password_hash.clone();
        let candidate = password.to_string();
        let ok = tokio::task::spawn_blocking(move || password::verify(&candidate, &hash))
            .await
            .unwrap_or(false);
        if !ok {
            return Err(AuthError::BadCredentials);
        }
        self.shared
            .cache
            .remember(username, password, &user.password_hash);
        Ok(identity)
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
        let mut data = AuthData::clone(&auth.data());
        data.users.get_mut("nacos").unwrap().password_hash = password::hash("two");
        auth.set_data(data.clone());
        assert_eq!(
            auth.identify(&creds, 0).await.unwrap_err(),
            AuthError::BadCredentials
        );
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
}
