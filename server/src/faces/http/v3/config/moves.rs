//! The v3 configuration operations that move items between namespaces and archives:
//! import, export, clone (Nacos' zip format through `nacos::config_zip`).

use super::*;

/// `POST /config/import?namespaceId=&policy=ABORT|SKIP|OVERWRITE`: the archive (the
/// multipart field `file`, or the whole body) imported as v1 imports it; `data`:
/// `{succCount, skipCount, failData, skipData}`. For admins.
#[tracing::instrument(skip_all)]
pub(super) async fn import(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    headers: HeaderMap,
    params: Params,
    request: Request,
) -> Response {
    let imported = async {
        let tenant = tenant_of(&params, NAMESPACE)?;
        let policy = Policy::of(&params)?;
        let body = request.into_body();
        config_zip::import_into(&state, &caller, &source, tenant, policy, &headers, body).await
    };
    answer(imported.await)
}

/// `GET /config/export?namespaceId=&dataId=&groupName=&appName=&ids=`: the items the
/// caller may read, as a zip archive (an error in the envelope).
pub(super) async fn export(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Response {
    config_zip::export_in(&state, &caller, &params, NAMESPACE, GROUP).unwrap_or_else(failure)
}

/// One entry of a clone order (Nacos' `ConfigCloneInfo`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct CloneOrder {
    /// The id of the item copied.
    config_id: u64,
    /// Its group in the target namespace (absent: its own).
    group: Option<String>,
    /// Its dataId there (absent: its own).
    data_id: Option<String>,
}

/// A clone order: a JSON list of `{configId, targetGroupName, targetDataId}` (ids as
/// numbers or strings; `null` entries passed over), each target name checked.
pub(super) fn clone_orders(body: &[u8]) -> Result<Vec<CloneOrder>, Error> {
    const SHAPE: &str = "it should be a JSON list of {configId, targetGroupName, targetDataId}";
    let orders: Value = serde_json::from_slice(body)
        .map_err(|e| Error::illegal("body", format!("{SHAPE}: {e}")))?;
    let Value::Array(orders) = orders else {
        return Err(Error::illegal("body", format!("{SHAPE}.")));
    };
    orders
        .iter()
        .filter(|o| !o.is_null())
        .map(|o| {
            let id = match &o["configId"] {
                Value::Number(n) => n.as_u64(),
                Value::String(s) => s.trim().parse().ok(),
                _ => None,
            };
            let config_id = id.ok_or_else(|| {
                Error::illegal("configId", format!("{} is not an item id.", o["configId"]))
            })?;
            let name = |field: &str| -> Result<Option<String>, Error> {
                match &o[field] {
                    Value::Null => Ok(None),
                    Value::String(s) if s.trim().is_empty() => Ok(None),
                    Value::String(s) => Ok(Some(s.clone())),
                    _ => Err(Error::illegal(field, "it should be a string.")),
                }
            };
            let group = name("targetGroupName")?;
            if let Some(g) = &group {
                check_config_group("targetGroupName", g)?;
            }
            let data_id = name("targetDataId")?;
            if let Some(d) = &data_id {
                check_data_id("targetDataId", d)?;
            }
            Ok(CloneOrder {
                config_id,
                group,
                data_id,
            })
        })
        .collect()
}

/// `POST /config/clone?namespaceId=&policy=`, the body a clone order ([`clone_orders`]):
/// copies the items of those ids into `namespaceId` (each under its target group and
/// dataId, else its own), their content, type, application and description, as an
/// import places them; `data`: `{succCount, skipCount, failData, skipData}`. For admins.
#[tracing::instrument(skip_all)]
pub(super) async fn clone_items(
    State(state): State<AppState>,
    caller: Caller,
    source: Source,
    params: Params,
    request: Request,
) -> Response {
    let cloned = async {
        let tenant = params.required(NAMESPACE)?;
        check_tenant(NAMESPACE, tenant)?;
        let policy = Policy::of(&params)?;
        let body = to_bytes(request.into_body(), MAX_CLONE_BODY)
            .await
            .map_err(|_| {
                Error::new(
                    crate::error::ErrorKind::TooLarge,
                    format!("the clone order exceeds {MAX_CLONE_BODY} bytes"),
                )
            })?;
        let orders = clone_orders(&body)?;
        if orders.is_empty() {
            return Err(Error::illegal("body", "no configuration item is selected."));
        }
        // The items as the leader's commit has them when the call came.
        state.store.read_barrier().await?;
        let order_of = |item: &ConfigItem| orders.iter().find(|o| o.config_id == item.id);
        let found = state.configs.search(
            &Search::default(),
            |_, item| order_of(item).is_some(),
            1,
            usize::MAX,
        );
        if found.items.is_empty() {
            return Err(Error::not_found("none of the selected items exists"));
        }
        let items: Vec<ArchivedItem> = found
            .items
            .iter()
            .filter_map(|(key, item)| {
                let order = order_of(item)?;
                Some(ArchivedItem {
                    group: order.group.clone().unwrap_or_else(|| key.group.clone()),
                    data_id: order.data_id.clone().unwrap_or_else(|| key.data_id.clone()),
                    content: item.content.to_string(),
                    r#type: item.r#type.clone(),
                    app_name: item.app_name.clone(),
                    desc: item.desc.clone(),
                })
            })
            .collect();
        config_zip::place(&state, &caller, &source, tenant, &items, policy, "body").await
    };
    answer(cloned.await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_order_is_a_list_of_ids_and_checked_targets() {
        let orders = clone_orders(
            br#"[{"configId":7},null,{"configId":"8","targetGroupName":"G2","targetDataId":"b"},
                {"configId":9,"targetGroupName":"","targetDataId":null}]"#,
        )
        .unwrap();
        assert_eq!(
            orders,
            [
                CloneOrder {
                    config_id: 7,
                    group: None,
                    data_id: None
                },
                CloneOrder {
                    config_id: 8,
                    group: Some("G2".into()),
                    data_id: Some("b".into())
                },
                CloneOrder {
                    config_id: 9,
                    group: None,
                    data_id: None
                },
            ]
        );
        assert!(clone_orders(b"[]").unwrap().is_empty());
        for (body, field) in [
            (&br#"{"configId":7}"#[..], "body"),
            (b"not json", "body"),
            (br#"[{"configId":-1}]"#, "configId"),
            (br#"[{"targetDataId":"b"}]"#, "configId"),
            (br#"[{"configId":1,"targetDataId":"a b"}]"#, "targetDataId"),
            (
                br#"[{"configId":1,"targetGroupName":"g/h"}]"#,
                "targetGroupName",
            ),
            (
                br#"[{"configId":1,"targetGroupName":3}]"#,
                "targetGroupName",
            ),
        ] {
            let e = clone_orders(body).unwrap_err();
            assert!(
                e.message.contains(&format!("'{field}'")),
                "{}: {e}",
                String::from_utf8_lossy(body)
            );
        }
    }
}
