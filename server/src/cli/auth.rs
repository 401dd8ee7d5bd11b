//! `roster auth rotate-key`: replaces the token signing key through a node's API.

use std::io::Write as _;

use anyhow::Context;
use hyper::Method;

use super::api::Api;
use super::query;
use crate::node::args::{AuthAction, ClientArgs, OutputFormat};

/// Runs `roster auth ...`.
pub async fn auth(action: AuthAction, client: ClientArgs) -> anyhow::Result<()> {
    let mut api = Api::connect(&client).await?;
    let AuthAction::RotateKey { drop_previous } = action;
    let path = format!(
        "/api/v1/auth/rotate-key?{}",
        query(&[("dropPrevious", drop_previous.to_string())])
    );
    let call = api.request(Method::POST, &path);
    let body = api.send(call).await?;
    let value: serde_json::Value = serde_json::from_str(&body).context("unexpected answer")?;
    if client.output == OutputFormat::Json {
        out!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
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
