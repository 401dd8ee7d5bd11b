//! `roster auth rotate-key`: replaces the token signing key through a node's API;
//! `roster auth token-create|tokens|token-revoke`: long-lived API tokens.

use std::io::Write as _;

use anyhow::Context;
use hyper::Method;

use super::api::Api;
use super::query;
use super::sync::table;
use crate::node::args::{AuthAction, ClientArgs, OutputFormat};

/// Runs `roster auth ...`.
pub async fn auth(action: AuthAction, client: ClientArgs) -> anyhow::Result<()> {
    let mut api = Api::connect(&client).await?;
    let call = match &action {
        AuthAction::RotateKey { drop_previous } => {
            let path = format!(
                "/api/v1/auth/rotate-key?{}",
                query(&[("dropPrevious", drop_previous.to_string())])
            );
            api.request(Method::POST, &path)
        }
        AuthAction::TokenCreate { user, description } => api
            .request(Method::POST, "/api/v1/tokens")
            .json(serde_json::json!({ "user": user, "description": description }).to_string()),
        AuthAction::Tokens { user } => {
            let filter = user
                .as_ref()
                .map(|u| format!("?{}", query(&[("user", u.clone())])))
                .unwrap_or_default();
            api.request(Method::GET, &format!("/api/v1/tokens{filter}"))
        }
        AuthAction::TokenRevoke { id } => api.request(
            Method::DELETE,
            &format!("/api/v1/tokens?{}", query(&[("id", id.clone())])),
        ),
    };
    let body = api.send(call).await?;
    let value: serde_json::Value = serde_json::from_str(&body).context("unexpected answer")?;
    if client.output == OutputFormat::Json {
        out!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    match action {
        AuthAction::RotateKey { .. } => rotated(&value)?,
        AuthAction::TokenCreate { user, .. } => {
            out!(
                "created API token {} for {user}; it is shown this once:",
                value["id"].as_str().unwrap_or("?")
            );
            out!("{}", value["token"].as_str().unwrap_or("?"));
        }
        AuthAction::Tokens { .. } => {
            let rows: Vec<Vec<String>> = value["tokens"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    ["id", "user", "description"]
                        .iter()
                        .map(|k| t[*k].as_str().unwrap_or("").to_string())
                        .collect()
                })
                .collect();
            let header = ["ID", "USER", "DESCRIPTION"];
            out!(
                "{}",
                table(&header, &rows, &[false, false, false]).trim_end()
            );
        }
        AuthAction::TokenRevoke { id } => out!("revoked API token {id} on every node"),
    }
    Ok(())
}

/// Prints what a key rotation did.
fn rotated(value: &serde_json::Value) -> anyhow::Result<()> {
    out!(
        "rotated the token signing key: new key {}",
        value["keyId"].as_str().unwrap_or("?")
    );
    let previous = value["previousKeyId"].as_str().unwrap_or("-");
    match value["previousValidUntil"].as_u64() {
        Some(until) => {
            let left = until.saturating_sub(roster_registry::clock::now_ms() / 1000);
            out!(
                "tokens signed by key {previous} are accepted for {left} s more, until they expire"
            );
        }
        None => out!("tokens signed by key {previous} or older are no longer accepted"),
    }
    Ok(())
}
