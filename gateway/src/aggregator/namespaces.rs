//! The namespace controller's reach into APIService backends: a terminating namespace's
//! objects of remote group-versions are deleted through their backends, as kube's namespace
//! controller deletes them through kube-aggregator, and what remains (or could not be
//! discovered) is counted for the namespace's deletion conditions. A group-version whose
//! backend is unavailable holds the namespace, as it does in kube: its content is unknown.
//!
//! Group-versions of a delegate cluster are left alone: their namespaces are the cluster's.

use kubegate_backends::registry::namespaces::ContentTotals;
use kubegate_policy::https::error_chain;
use serde_json::{json, Value};

use super::apiservice::Target;
use super::availability::{client_for, discovery_path, url_host, with_identity_as};
use super::table::Backend;
use super::Aggregator;

/// The user kube's namespace controller runs as.
pub const NAMESPACE_CONTROLLER_USER: &str =
    "system:serviceaccount:kube-system:namespace-controller";
const NAMESPACE_CONTROLLER_GROUPS: [&str; 3] = [
    "system:serviceaccounts",
    "system:serviceaccounts:kube-system",
    "system:authenticated",
];

/// Deletes `namespace`'s content in every remote group-version and counts what is left.
pub async fn delete_remote_content(aggregator: &Aggregator, namespace: &str) -> ContentTotals {
    let mut content = ContentTotals::default();
    let table = aggregator.table.load_full();
    for backend in table.backends() {
        if matches!(backend.service.target, Target::Local | Target::Delegate) {
            continue;
        }
        let gv = format!("{}/{}", backend.service.group, backend.service.version);
        if backend.unavailable().is_some() {
            // What client-go's aggregated discovery reports for such a group-version.
            content
                .discovery_failures
                .insert(gv.clone(), format!("stale GroupVersion discovery: {gv}"));
            continue;
        }
        let client = match Client::new(backend) {
            Ok(client) => client,
            Err(why) => {
                content.discovery_failures.insert(gv, why);
                continue;
            }
        };
        let resources = match client
            .json(
                http::Method::GET,
                &discovery_path(&backend.service.group, &backend.service.version),
                None,
            )
            .await
        {
            Ok(list) => list,
            Err(why) => {
                content.discovery_failures.insert(gv, why);
                continue;
            }
        };
        for resource in deletable(&resources) {
            client
                .delete_all(backend, namespace, &resource, &mut content)
                .await;
        }
    }
    content
}

/// A namespaced resource (not a subresource) of an `APIResourceList` that can be deleted, as
/// the namespace controller filters discovery (`SupportsAllVerbs{"delete"}`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Deletable {
    name: String,
    delete_collection: bool,
    list: bool,
}

fn deletable(resource_list: &Value) -> Vec<Deletable> {
    let Some(resources) = resource_list.get("resources").and_then(Value::as_array) else {
        return Vec::new();
    };
    resources
        .iter()
        .filter(|r| r.get("namespaced").and_then(Value::as_bool) == Some(true))
        .filter_map(|r| {
            let name = r.get("name").and_then(Value::as_str)?;
            if name.is_empty() || name.contains('/') {
                return None;
            }
            let verbs: Vec<&str> = r
                .get("verbs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            verbs.contains(&"delete").then(|| Deletable {
                name: name.to_string(),
                delete_collection: verbs.contains(&"deletecollection"),
                list: verbs.contains(&"list"),
            })
        })
        .collect()
}

/// Requests to one backend as the namespace controller.
struct Client<'b> {
    backend: &'b Backend,
    http: reqwest::Client,
    base: String,
}

impl<'b> Client<'b> {
    fn new(backend: &'b Backend) -> Result<Client<'b>, String> {
        let location = backend.location.as_ref().map_err(|e| e.message.clone())?;
        let address = backend
            .next_address()
            .ok_or_else(|| "no address to reach the backend at".to_string())?;
        let http = client_for(backend, location, address)?;
        Ok(Client {
            backend,
            http,
            base: format!(
                "https://{}:{}{}",
                url_host(&location.server_name),
                address.port(),
                location.base_path
            ),
        })
    }

    /// One request with the namespace controller's identity; the answer's JSON, or why
    /// there is none.
    async fn json(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let mut request = with_identity_as(
            self.http
                .request(method, &url)
                .header(http::header::ACCEPT, "application/json"),
            &self.backend.identity,
            NAMESPACE_CONTROLLER_USER,
            &NAMESPACE_CONTROLLER_GROUPS,
        );
        if let Some(body) = body {
            request = request
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.map_err(|e| error_chain(&e))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| error_chain(&e))?;
        let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(value);
        }
        // A Status body says why in its own words; anything else by its code.
        Err(value
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| {
                format!(
                    "the server responded with the status code {}",
                    status.as_u16()
                )
            }))
    }

    /// Deletes every object of `resource` in `namespace` (one delete-collection, or one
    /// delete per listed object), then counts those that stay.
    async fn delete_all(
        &self,
        backend: &Backend,
        namespace: &str,
        resource: &Deletable,
        content: &mut ContentTotals,
    ) {
        let group = &backend.service.group;
        let collection = format!(
            "/apis/{group}/{}/namespaces/{namespace}/{}",
            backend.service.version, resource.name
        );
        let options = json!({"kind": "DeleteOptions", "apiVersion": "v1",
            "propagationPolicy": "Background"});
        let failed = |why: String| format!("{}.{group}: {why}", resource.name);
        if resource.delete_collection {
            if let Err(why) = self
                .json(http::Method::DELETE, &collection, Some(options.clone()))
                .await
            {
                content.failures.push(failed(why));
                return;
            }
        }
        if !resource.list {
            return;
        }
        let items = match self.json(http::Method::GET, &collection, None).await {
            Ok(list) => list
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            Err(why) => {
                content.failures.push(failed(why));
                return;
            }
        };
        for item in items {
            let left = if resource.delete_collection
                || item.pointer("/metadata/deletionTimestamp").is_some()
            {
                Some(item)
            } else {
                let name = item
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let path = format!("{collection}/{name}");
                match self
                    .json(http::Method::DELETE, &path, Some(options.clone()))
                    .await
                {
                    // A finished delete answers with a Status; a pending one with the object.
                    Ok(answer) if answer.get("kind").and_then(Value::as_str) == Some("Status") => {
                        None
                    }
                    Ok(answer) => Some(answer),
                    Err(why) => {
                        content.failures.push(failed(why));
                        Some(item)
                    }
                }
            };
            if let Some(left) = left {
                content.count_remaining(&resource.name, group, &left);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_namespaced_deletable_resources_are_deleted() {
        let list = json!({"kind": "APIResourceList", "resources": [
            {"name": "flunders", "namespaced": true,
             "verbs": ["create", "delete", "deletecollection", "get", "list"]},
            {"name": "flunders/status", "namespaced": true, "verbs": ["get", "update"]},
            {"name": "fischers", "namespaced": false, "verbs": ["delete", "list"]},
            {"name": "readonly", "namespaced": true, "verbs": ["get", "list"]},
            {"name": "one-by-one", "namespaced": true, "verbs": ["delete", "list"]},
        ]});
        assert_eq!(
            deletable(&list),
            vec![
                Deletable {
                    name: "flunders".into(),
                    delete_collection: true,
                    list: true
                },
                Deletable {
                    name: "one-by-one".into(),
                    delete_collection: false,
                    list: true
                },
            ]
        );
        assert!(deletable(&json!({"kind": "Status"})).is_empty());
    }
}
