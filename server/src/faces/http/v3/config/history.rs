//! The v3 configuration history: a page of an item's versions, one version, the one
//! before it, the items of a namespace with history.

use super::*;

/// `GET /history/list`: a page of the item's versions, newest first,
/// `Page<ConfigHistoryBasicInfo>`.
pub(super) async fn history_list(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let key = item_of(&params)?;
        let (page_no, page_size) = paging(&params)?;
        let versions = state.configs.history(&key);
        let total = versions.len();
        let rows = page(versions, page_no, page_size)
            .iter()
            .map(|v| version(&key, v, false))
            .collect();
        Ok(page_of(total, page_no, page_size, rows))
    })())
}

/// `GET /history?nid=`: that version of the item, `ConfigHistoryDetailInfo` (404 when
/// the item has no such version).
pub(super) async fn history_get(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let key = item_of(&params)?;
        let id = id_of(&params, "nid")?;
        let v = state.configs.version(&key, id).ok_or_else(|| {
            Error::not_found(format!("certain config history for nid = {id} not exist"))
        })?;
        Ok(version(&key, &v, true))
    })())
}

/// `GET /history/previous?id=`: the version before version `id`, in detail (404 when
/// there is none).
pub(super) async fn history_previous(State(state): State<AppState>, params: Params) -> Response {
    answer((|| {
        let key = item_of(&params)?;
        let id = id_of(&params, "id")?;
        let v = state.configs.previous(&key, id).ok_or_else(|| {
            Error::not_found(format!("previous config history for id = {id} not exist"))
        })?;
        Ok(version(&key, &v, true))
    })())
}

/// `GET /history/configs?namespaceId=`: the items of the namespace that have versions
/// (removed ones among them) that the caller may read, `[ConfigBasicInfo]`.
pub(super) async fn history_configs(
    State(state): State<AppState>,
    caller: Caller,
    params: Params,
) -> Response {
    answer(tenant_of(&params, NAMESPACE).map(|tenant| {
        let rows: Vec<Value> = state
            .configs
            .keys_with_history(namespace_of(tenant))
            .iter()
            .filter(|key| caller.may_read_config(&state, key))
            .filter_map(
                |key| match state.configs.with(key, |item| basic(key, item)) {
                    Some(row) => Some(row),
                    None => removed(key, &state.configs.history(key)),
                },
            )
            .collect();
        Value::Array(rows)
    }))
}
