//! Custom resources converted by their CRD's webhook: stored objects of another version are
//! sent to the webhook (batched) before the synchronous read paths serve them, and their
//! served form is kept in each cached object's conversion cache, where those paths find it;
//! written objects are converted to the storage version before they are stored. kube's
//! watch cache keeps one decoded (converted) copy of each object per served version, so a
//! webhook sees each stored revision once per version here too, not once per read.

use serde_json::Value;

use super::served_bytes;
use crate::resource::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::cacher::CachedObject;

/// Converts, with the CRD's webhook, those of `objects` the served version cannot read as
/// stored and that are not converted yet, and keeps what is served in their conversion
/// caches. Nothing to do for other resources.
pub(crate) async fn prepare<O: AsRef<CachedObject>>(
    def: &ResourceDef,
    objects: &[O],
) -> ApiResult<()> {
    let Some(conversion) = def.strategy.webhook_conversion() else {
        return Ok(());
    };
    let id = def.strategy.conversion_id();
    let mut pending: Vec<(&CachedObject, Value)> = Vec::new();
    for object in objects {
        let object = object.as_ref();
        if object.conversions.has(id) {
            continue;
        }
        let value: Value = serde_json::from_slice(&object.bytes).map_err(ApiError::internal)?;
        if conversion.needs(&value) {
            pending.push((object, value));
        } else {
            // Kept too, so the next read neither parses it here nor decodes it again.
            served_bytes(def, object)?;
        }
    }
    if pending.is_empty() {
        return Ok(());
    }
    let (cached, values): (Vec<&CachedObject>, Vec<Value>) = pending
        .into_iter()
        .map(|(object, value)| (object, def.strategy.default_stored(value)))
        .unzip();
    let converted = conversion.to_served(values).await?;
    for (object, value) in cached.into_iter().zip(converted) {
        let served = def.strategy.decode_converted(value);
        let bytes = bytes::Bytes::from(serde_json::to_vec(&served).map_err(ApiError::internal)?);
        object
            .conversions
            .get_or_convert(id, &object.bytes, || Ok::<_, ApiError>(bytes))?;
    }
    Ok(())
}

/// A cached object as `def` serves it, converted by the CRD's webhook first if it must be.
pub(crate) async fn served_value(def: &ResourceDef, object: &CachedObject) -> ApiResult<Value> {
    prepare(def, &[object]).await?;
    let bytes = served_bytes(def, object)?;
    serde_json::from_slice(&bytes).map_err(ApiError::internal)
}

/// A served object in the storage version, when that takes the CRD's webhook (`None`: store
/// it as the strategy encodes it).
pub(crate) async fn storage_form(def: &ResourceDef, object: &Value) -> ApiResult<Option<Value>> {
    match def.strategy.webhook_conversion() {
        Some(conversion) if conversion.served != conversion.storage => {
            conversion.to_storage(object.clone()).await.map(Some)
        }
        _ => Ok(None),
    }
}

/// What a client gets back after a write stored `stored` (the storage form of its object):
/// converted back to the served version by the webhook, as kube decodes what it stored.
pub(crate) async fn served_after_write(def: &ResourceDef, stored: Value) -> ApiResult<Value> {
    let Some(conversion) = def.strategy.webhook_conversion() else {
        return def.strategy.decode_stored(stored);
    };
    if !conversion.needs(&stored) {
        return def.strategy.decode_stored(stored);
    }
    let converted = conversion
        .to_served(vec![def.strategy.default_stored(stored)])
        .await?
        .into_iter()
        .next()
        .ok_or_else(|| ApiError::internal("the conversion webhook returned no object"))?;
    Ok(def.strategy.decode_converted(converted))
}
