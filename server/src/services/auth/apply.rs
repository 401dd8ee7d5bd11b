//! How the state machine applies auth commands — bootstrap, users, roles, permissions
//! and the signing key — and the rules it decides them by: an admin is not deleted, the
//! last admin keeps `ROLE_ADMIN`, and a change of a user's password or roles ends their
//! tokens. Each command edits a copy of [`AuthData`] that replaces it whole, unless the
//! command is refused.

use super::permissions::{Grant, ROLE_ADMIN};
use super::{Auth, AuthData, User};
use crate::services::store::command::{CommandV1, Outcome, Rejection};

/// Applies auth `command` to `auth`.
pub fn apply(auth: &Auth, command: CommandV1) -> Outcome {
    match command {
        CommandV1::Bootstrap {
            signing_key,
            admin,
            password_hash,
        } => edit(auth, |data| {
            if data.signing_key.is_some() {
                return Err(Rejection::AlreadyBootstrapped);
            }
            data.signing_key = Some(signing_key);
            data.users.insert(
                admin,
                User {
                    password_hash,
                    admin: true,
                },
            );
            Ok(())
        }),
        CommandV1::CreateUser { username, user } => edit(auth, |data| {
            if data.users.contains_key(&username) {
                return Err(Rejection::UserExists(username));
            }
            data.users.insert(username, user);
            Ok(())
        }),
        CommandV1::SetPassword {
            username,
            password_hash,
        } => edit(auth, |data| match data.users.get_mut(&username) {
            Some(user) => {
                user.password_hash = password_hash;
                data.revoke_tokens(&username);
                Ok(())
            }
            None => Err(Rejection::UserNotFound(username)),
        }),
        CommandV1::DeleteUser { username } => edit(auth, |data| match data.users.get(&username) {
            Some(user) if user.admin => Err(Rejection::DeleteAdmin(username)),
            Some(_) => {
                data.users.remove(&username);
                // A user created again under this name starts without roles and
                // without the old tokens, API tokens included.
                data.roles.remove(&username);
                data.revoke_tokens(&username);
                data.api_tokens.retain(|_, token| token.user != username);
                Ok(())
            }
            None => Err(Rejection::UserNotFound(username)),
        }),
        CommandV1::CreateApiToken { id, token } => edit(auth, |data| {
            if !data.users.contains_key(&token.user) {
                return Err(Rejection::UserNotFound(token.user));
            }
            data.api_tokens.insert(id, token);
            Ok(())
        }),
        CommandV1::RevokeApiToken { id } => edit(auth, |data| {
            data.api_tokens
                .remove(&id)
                .map(|_| ())
                .ok_or(Rejection::ApiTokenNotFound(id))
        }),
        CommandV1::RotateKey {
            signing_key,
            keep_previous_secs,
            at_ms,
        } => edit(auth, |data| {
            if !data.rotate(signing_key, keep_previous_secs, at_ms) {
                return Err(Rejection::NotBootstrapped);
            }
            Ok(())
        }),
        CommandV1::AddRole { role, username } => edit(auth, |data| add_role(data, role, username)),
        CommandV1::DeleteRole { role, username } => {
            edit(auth, |data| delete_role(data, &role, username.as_deref()))
        }
        CommandV1::AddPermission {
            role,
            resource,
            action,
        } => edit(auth, |data| {
            data.permissions
                .entry(role)
                .or_default()
                .insert(Grant { resource, action });
            Ok(())
        }),
        CommandV1::DeletePermission {
            role,
            resource,
            action,
        } => edit(auth, |data| {
            if let Some(grants) = data.permissions.get_mut(&role) {
                grants.remove(&Grant { resource, action });
                if grants.is_empty() {
                    data.permissions.remove(&role);
                }
            }
            Ok(())
        }),
        other => unreachable!("a {:?} command routed to auth", other.domain()),
    }
}

/// Applies `f` to a copy of the auth data and installs it, unless `f` refuses.
fn edit(auth: &Auth, f: impl FnOnce(&mut AuthData) -> Outcome) -> Outcome {
    let mut data = AuthData::clone(&auth.data());
    f(&mut data)?;
    auth.set_data(data);
    Ok(())
}

/// Binds `role` to `username`; `ROLE_ADMIN` sets the user's admin flag. The user's
/// tokens end when their roles change (a binding they had already changes nothing).
fn add_role(data: &mut AuthData, role: String, username: String) -> Outcome {
    let Some(user) = data.users.get_mut(&username) else {
        return Err(Rejection::UserNotFound(username));
    };
    let changed = if role == ROLE_ADMIN {
        !std::mem::replace(&mut user.admin, true)
    } else {
        data.roles.entry(username.clone()).or_default().insert(role)
    };
    if changed {
        data.revoke_tokens(&username);
    }
    Ok(())
}

/// Unbinds `role` from `username`, or from everyone holding it; the tokens of each
/// user unbound end. `ROLE_ADMIN` is taken only from one user at a time, and never
/// from the last admin.
fn delete_role(data: &mut AuthData, role: &str, username: Option<&str>) -> Outcome {
    if role == ROLE_ADMIN {
        let Some(username) = username else {
            return Err(Rejection::DeleteAdmin(ROLE_ADMIN.into()));
        };
        let admins = data.users.values().filter(|u| u.admin).count();
        match data.users.get_mut(username) {
            Some(user) if user.admin => {
                if admins <= 1 {
                    return Err(Rejection::DeleteAdmin(username.into()));
                }
                user.admin = false;
                data.revoke_tokens(username);
            }
            // Not an admin: nothing to take (as Nacos, no error).
            _ => {}
        }
        return Ok(());
    }
    let holders: Vec<String> = data
        .roles
        .iter()
        .filter(|(user, roles)| username.is_none_or(|u| u == *user) && roles.contains(role))
        .map(|(user, _)| user.clone())
        .collect();
    for user in holders {
        if let Some(roles) = data.roles.get_mut(&user) {
            roles.remove(role);
            if roles.is_empty() {
                data.roles.remove(&user);
            }
        }
        data.revoke_tokens(&user);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bootstrapped() -> Auth {
        let auth = Auth::new(true, 60);
        apply(
            &auth,
            CommandV1::Bootstrap {
                signing_key: b"k1".to_vec(),
                admin: "nacos".into(),
                password_hash: "hash".into(),
            },
        )
        .unwrap();
        auth
    }

    #[test]
    fn bootstrap_happens_once_and_makes_the_admin() {
        let auth = bootstrapped();
        assert!(auth.data().users["nacos"].admin);
        let again = CommandV1::Bootstrap {
            signing_key: b"k2".to_vec(),
            admin: "other".into(),
            password_hash: "hash".into(),
        };
        assert_eq!(apply(&auth, again), Err(Rejection::AlreadyBootstrapped));
        assert_eq!(auth.data().signing_key.as_deref(), Some(&b"k1"[..]));
        assert!(!auth.data().users.contains_key("other"));
    }

    #[test]
    fn a_refused_command_leaves_the_data_as_it_was() {
        let auth = bootstrapped();
        let before = auth.data();
        let delete_admin = CommandV1::DeleteUser {
            username: "nacos".into(),
        };
        assert_eq!(
            apply(&auth, delete_admin),
            Err(Rejection::DeleteAdmin("nacos".into()))
        );
        let take_admin = CommandV1::DeleteRole {
            role: ROLE_ADMIN.into(),
            username: Some("nacos".into()),
        };
        assert_eq!(
            apply(&auth, take_admin),
            Err(Rejection::DeleteAdmin("nacos".into()))
        );
        assert_eq!(*auth.data(), *before);
    }

    #[test]
    fn a_new_user_under_an_old_name_gets_neither_roles_nor_tokens_back() {
        let auth = bootstrapped();
        let create = || CommandV1::CreateUser {
            username: "ann".into(),
            user: User {
                password_hash: "h".into(),
                admin: false,
            },
        };
        apply(&auth, create()).unwrap();
        assert_eq!(
            apply(&auth, create()),
            Err(Rejection::UserExists("ann".into()))
        );
        let bind = CommandV1::AddRole {
            role: "dev".into(),
            username: "ann".into(),
        };
        apply(&auth, bind).unwrap();
        let delete = CommandV1::DeleteUser {
            username: "ann".into(),
        };
        apply(&auth, delete).unwrap();
        apply(&auth, create()).unwrap();
        let data = auth.data();
        assert!(data.roles.is_empty());
        assert_eq!(data.token_generation("ann"), 2);
    }
}
