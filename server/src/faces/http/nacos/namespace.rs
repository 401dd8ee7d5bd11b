//! `/nacos/v1/console/namespaces`: list, create, rename and delete namespaces.
//!
//! Nacos answers these with HTTP 200 and `false` on any failure; roster answers `true`
//! on success and a 4xx with a message otherwise (409 when the id exists or the
//! namespace still holds services).

use axum::extract::State;
use axum::response::Response;
use serde_json::json;

use super::{envelope, json_of};
use crate::error::Error;
use crate::faces::http::guard::Caller;
use crate::faces::http::params::Params;
use crate::state::AppState;
use roster_registry::namespace::{Namespace, NamespaceInfo, PUBLIC_NAMESPACE};
use roster_registry::validate::check_namespace_id;

/// Characters Nacos refuses in namespace names.
const FORBIDDEN_NAME_CHARS: &[char] = &['@', '#', '$', '%', '^', '&', '*'];

/// A namespace in Nacos' shape (`namespace`, `namespaceShowName`, ...).
pub(crate) fn row(state: &AppState, ns: &Namespace) -> serde_json::Value {
    let info = ns.display();
    let (mut services, mut instances) = (0usize, 0usize);
    for svc in ns.services.iter() {
        services += 1;
        instances += svc.view().instances.len();
    }
    json!({
        "namespace": info.id,
        "namespaceShowName": info.name,
        "namespaceDesc": info.description,
        "quota": 200,
        "configCount": state.configs.count_in(&ns.id),
        "serviceCount": services,
        "instanceCount": instances,
        // Nacos: 0 = public, 1 = private, 2 = custom.
        "type": if &*ns.id == PUBLIC_NAMESPACE { 0 } else { 2 },
    })
}

/// `GET`: every namespace the caller may read something of (`{"code":200,"data":[...]}`);
/// with `show=all&namespaceId=x` one of them; with
/// `checkNamespaceIdExist=true&customNamespaceId=x` whether it exists (admins: the
/// guard checks what these forms need).
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    if params.boolean("checkNamespaceIdExist")?.unwrap_or(false) {
        let id = params.required("customNamespaceId")?;
        let exists = id == PUBLIC_NAMESPACE
            || state
                .registry
                .namespace(id)
                .is_some_and(|n| n.info().is_some());
        return Ok(json_of(&exists));
    }
    if params.optional("show") == Some("all") {
        let id = params.namespace()?;
        let ns = state
            .registry
            .namespace(&id)
            .filter(|n| n.info().is_some() || &*n.id == PUBLIC_NAMESPACE)
            .ok_or_else(|| Error::not_found(format!("namespace {id} not found")))?;
        return Ok(json_of(&row(&state, &ns)));
    }
    let rows: Vec<_> = state
        .registry
        .namespaces()
        .iter()
        .filter(|n| caller.may_read_namespace(&state, &n.id))
        .map(|n| row(&state, n))
        .collect();
    Ok(envelope(rows))
}

/// A namespace name from `key`, checked.
pub(crate) fn name(params: &Params, key: &str) -> Result<String, Error> {
    let name = params.required(key)?;
    if name.chars().count() > 128 {
        return Err(Error::illegal(
            key,
            "the name should not exceed 128 characters.",
        ));
    }
    if name.contains(FORBIDDEN_NAME_CHARS) {
        return Err(Error::illegal(
            key,
            "the name must not contain any of @#$%^&*.",
        ));
    }
    Ok(name.to_string())
}

/// A namespace description from `key` (empty when absent), checked.
pub(crate) fn description(params: &Params, key: &str) -> Result<String, Error> {
    let desc = params.get(key).unwrap_or("").trim();
    if desc.chars().count() > 256 {
        return Err(Error::illegal(
            key,
            "the description should not exceed 256 characters.",
        ));
    }
    Ok(desc.to_string())
}

/// `POST`: create a namespace (`customNamespaceId` empty or absent → a random id).
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let id = match params.optional("customNamespaceId") {
        Some(id) => {
            check_namespace_id("customNamespaceId", id)?;
            id.to_string()
        }
        None => random_id(),
    };
    let info = NamespaceInfo {
        id,
        name: name(&params, "namespaceName")?,
        description: description(&params, "namespaceDesc")?,
    };
    state.writes().create_namespace(info).await?;
    Ok(json_of(&true))
}

/// `PUT`: rename and describe a namespace.
pub async fn update(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let id = params.required("namespace")?;
    check_namespace_id("namespace", id)?;
    if id == PUBLIC_NAMESPACE {
        return Err(Error::bad_request("the public namespace cannot be changed"));
    }
    let info = NamespaceInfo {
        id: id.to_string(),
        name: name(&params, "namespaceShowName")?,
        description: description(&params, "namespaceDesc")?,
    };
    state.writes().update_namespace(info).await?;
    Ok(json_of(&true))
}

/// `DELETE`: delete an empty namespace.
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Result<Response, Error> {
    caller.require_admin()?;
    let id = params.required("namespaceId")?;
    check_namespace_id("namespaceId", id)?;
    state.writes().delete_namespace(id, &state.configs).await?;
    Ok(json_of(&true))
}

/// A random namespace id in UUID form.
pub(crate) fn random_id() -> String {
    let b: [u8; 16] = rand::random();
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
