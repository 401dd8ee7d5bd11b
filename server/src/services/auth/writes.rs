//! Where an auth write goes, for every face: users, roles, permissions and the token
//! signing key are Raft data, proposed here after the checks a face's answer depends on.
//!
//! A check that refuses on this node's view is made again after a read barrier
//! ([`Store::recheck`]) for users; role and permission changes read the auth data
//! through the leader first, so what they check — a binding that exists, a role that
//! holds no permission yet — is current whichever node takes them, and they return once
//! this node applied them too. The state machine decides again when it applies
//! (`auth::apply`).

use std::sync::Arc;

use super::permissions::{Granted, ROLE_ADMIN};
use super::{Auth, AuthData, User};
use crate::error::Error;
use crate::services::store::command::CommandV1;
use crate::services::store::{ProposeError, Store};
use roster_registry::clock::now_ms;

/// The auth write path of a node, over its auth state and Raft store.
#[derive(Clone, Copy)]
pub struct Writes<'a> {
    /// Raft.
    pub store: &'a Store,
    /// The auth state (read for the checks, and to hash passwords).
    pub auth: &'a Auth,
}

/// What a key rotation replaced.
#[derive(Clone, Debug)]
pub struct Rotated {
    /// The new signing key.
    pub key: [u8; 32],
    /// The key it replaced, if the cluster had one.
    pub previous: Option<Vec<u8>>,
}

/// First start of a cluster: a random token signing key and the admin user `admin`
/// with `password_hash`. Refused with `Rejection::AlreadyBootstrapped` when the cluster
/// has a key already.
pub async fn bootstrap(
    store: &Store,
    admin: &str,
    password_hash: String,
) -> Result<(), ProposeError> {
    let signing_key: [u8; 32] = rand::random();
    store
        .propose(CommandV1::Bootstrap {
            signing_key: signing_key.to_vec(),
            admin: admin.into(),
            password_hash,
        })
        .await
}

impl<'a> Writes<'a> {
    /// The auth writes over `store` and `auth`.
    pub fn new(store: &'a Store, auth: &'a Auth) -> Self {
        Self { store, auth }
    }

    /// Creates a user who is not an admin (a name taken is a 409, judged again after a
    /// read barrier when this node's view refuses).
    pub async fn create_user(&self, username: &str, password: &str) -> Result<(), Error> {
        self.store
            .recheck(|| match self.auth.data().users.contains_key(username) {
                true => Err(Error::conflict(format!("user '{username}' already exists"))),
                false => Ok(()),
            })
            .await?;
        let user = User {
            password_hash: self.auth.hash_password(password).await?,
            admin: false,
        };
        self.store
            .propose(CommandV1::CreateUser {
                username: username.to_string(),
                user,
            })
            .await?;
        Ok(())
    }

    /// Sets `username`'s password, ending their tokens on every node (a user not found
    /// is a 404, judged again after a read barrier).
    pub async fn set_password(&self, username: &str, password: &str) -> Result<(), Error> {
        self.store
            .recheck(|| match self.auth.data().users.contains_key(username) {
                true => Ok(()),
                false => Err(Error::not_found(format!("user '{username}' not found"))),
            })
            .await?;
        self.store
            .propose(CommandV1::SetPassword {
                username: username.to_string(),
                password_hash: self.auth.hash_password(password).await?,
            })
            .await?;
        Ok(())
    }

    /// Creates a long-lived API token for `user`; its id and the token, which is
    /// never shown again, and works on this node when answered (a user not found is a
    /// 404, judged again after a read barrier).
    pub async fn create_api_token(
        &self,
        user: &str,
        description: &str,
    ) -> Result<(String, String), Error> {
        self.store
            .recheck(|| match self.auth.data().users.contains_key(user) {
                true => Ok(()),
                false => Err(Error::not_found(format!("user '{user}' not found"))),
            })
            .await?;
        let (id, token, secret_sha256) = super::api_tokens::generate();
        self.store
            .propose(CommandV1::CreateApiToken {
                id: id.clone(),
                token: super::api_tokens::ApiToken {
                    user: user.to_string(),
                    description: description.to_string(),
                    secret_sha256,
                    created_ms: roster_registry::clock::now_ms(),
                },
            })
            .await?;
        self.store.read_barrier().await?;
        Ok((id, token))
    }

    /// Revokes the API token `id` on every node, refused here when answered (an
    /// unknown id is a 404).
    pub async fn revoke_api_token(&self, id: &str) -> Result<(), Error> {
        self.store
            .propose(CommandV1::RevokeApiToken { id: id.to_string() })
            .await?;
        self.store.read_barrier().await?;
        Ok(())
    }

    /// Deletes a user (an admin is refused when applied).
    pub async fn delete_user(&self, username: &str) -> Result<(), Error> {
        self.store
            .propose(CommandV1::DeleteUser {
                username: username.to_string(),
            })
            .await?;
        Ok(())
    }

    /// Binds `role` to `username`, ending the user's tokens; `ROLE_ADMIN` makes the
    /// user an admin. A user not found is a 404, a binding they hold a 409.
    pub async fn add_role(&self, role: &str, username: &str) -> Result<(), Error> {
        let data = self.current().await?;
        let user = data
            .users
            .get(username)
            .ok_or_else(|| Error::not_found(format!("user '{username}' not found!")))?;
        let bound = if role == ROLE_ADMIN {
            user.admin
        } else {
            data.roles.get(username).is_some_and(|r| r.contains(role))
        };
        if bound {
            return Err(Error::conflict(format!(
                "user '{username}' already bound to the role '{role}'!"
            )));
        }
        self.change(CommandV1::AddRole {
            role: role.to_string(),
            username: username.to_string(),
        })
        .await
    }

    /// Unbinds `role` from `username`, or from every user holding it, ending their
    /// tokens. `ROLE_ADMIN` is taken from one user at a time (and the last admin keeps
    /// it, decided when applied).
    pub async fn delete_role(&self, role: &str, username: Option<&str>) -> Result<(), Error> {
        let data = self.current().await?;
        let held = |user: &str| match role {
            ROLE_ADMIN => data.users.get(user).is_some_and(|u| u.admin),
            _ => data.roles.get(user).is_some_and(|r| r.contains(role)),
        };
        match username {
            Some(user) if !held(user) => {
                return Err(Error::not_found(format!(
                    "user '{user}' has no role '{role}'"
                )))
            }
            None if role == ROLE_ADMIN => {
                return Err(Error::bad_request(format!(
                    "{ROLE_ADMIN} is taken from one user at a time: give username"
                )))
            }
            None if !data.role_exists(role) => {
                return Err(Error::not_found(format!("role '{role}' not found!")))
            }
            _ => {}
        }
        self.change(CommandV1::DeleteRole {
            role: role.to_string(),
            username: username.map(str::to_string),
        })
        .await
    }

    /// Grants `action` on `resource` to `role`, which some user must hold. Takes effect
    /// on the next request of every holder, on every node.
    pub async fn add_permission(
        &self,
        role: &str,
        resource: &str,
        action: Granted,
    ) -> Result<(), Error> {
        if role == ROLE_ADMIN {
            return Err(Error::illegal(
                "role",
                format!("{ROLE_ADMIN} may do everything already."),
            ));
        }
        let data = self.current().await?;
        if !data.role_exists(role) {
            return Err(Error::not_found(format!("role '{role}' not found!")));
        }
        if data
            .permissions_of(role)
            .any(|g| g.resource == resource && g.action == action)
        {
            return Err(Error::conflict("permission already exists!"));
        }
        self.change(CommandV1::AddPermission {
            role: role.to_string(),
            resource: resource.to_string(),
            action,
        })
        .await
    }

    /// Takes back a permission exactly as it was granted (one not granted is a 404).
    pub async fn delete_permission(
        &self,
        role: &str,
        resource: &str,
        action: Granted,
    ) -> Result<(), Error> {
        let data = self.current().await?;
        if !data
            .permissions_of(role)
            .any(|g| g.resource == resource && g.action == action)
        {
            return Err(Error::not_found(format!(
                "role '{role}' has no permission {action} on '{resource}'",
                action = action.as_str()
            )));
        }
        self.change(CommandV1::DeletePermission {
            role: role.to_string(),
            resource: resource.to_string(),
            action,
        })
        .await
    }

    /// Replaces the token signing key with a random one. The replaced key keeps
    /// verifying its tokens for one token lifetime, unless `drop_previous`. Returns
    /// once this node applied the rotation, so that it signs with the new key.
    pub async fn rotate_key(&self, drop_previous: bool) -> Result<Rotated, Error> {
        let previous = self.auth.data().signing_key.clone();
        let key: [u8; 32] = rand::random();
        self.store
            .propose(CommandV1::RotateKey {
                signing_key: key.to_vec(),
                keep_previous_secs: if drop_previous {
                    0
                } else {
                    self.auth.token_ttl_secs()
                },
                at_ms: now_ms(),
            })
            .await?;
        // A follower's proposal is answered once the leader applied it: catch up, so
        // that this node signs with the new key from the answer on.
        self.store.read_barrier().await?;
        Ok(Rotated { key, previous })
    }

    /// The auth data as of now on the leader.
    async fn current(&self) -> Result<Arc<AuthData>, Error> {
        self.store.read_barrier().await?;
        Ok(self.auth.data())
    }

    /// Proposes `command`, then waits until this node applied it too.
    async fn change(&self, command: CommandV1) -> Result<(), Error> {
        self.store.propose(command).await?;
        self.store.read_barrier().await?;
        Ok(())
    }
}
