//! OpenAPI v2 (Swagger 2.0) to OpenAPI 3.0, for an APIService whose backend publishes only
//! `/openapi/v2`: kube-aggregator serves such a backend's `/openapi/v3/apis/<g>/<v>` from its
//! v2 document converted by kube-openapi's `openapiconv.ConvertV2ToV3`, and [`v2_to_v3`]
//! converts the same way:
//!
//! - `definitions` become `components.schemas`, `securityDefinitions` become
//!   `components.securitySchemes`, top-level `responses` become `components.responses`
//!   (with the top-level `produces`); `host`, `basePath`, `schemes`, `consumes`, `produces`,
//!   `security` and `tags` at the top are dropped, as kube drops them.
//! - A `body` parameter becomes the operation's `requestBody`, one content entry per media
//!   type the operation consumes; other parameters keep their place, their simple type
//!   becoming a `schema`. A response's schema becomes one content entry per media type the
//!   operation produces.
//! - `$ref`s move to `#/components/...`; a `$ref` with sibling keys is wrapped in `allOf`
//!   (OpenAPI 3.0 ignores a reference's siblings).
//!
//! What kube leaves broken is done right here: a parameter given by `$ref` to the document's
//! top-level `parameters` (k8s.io/apiserver-based servers share their common parameters that
//! way) is inlined, since kube converts no `components.parameters` and its references dangle
//! (and a shared `body` parameter then never becomes a `requestBody`); references are
//! rewritten in every nested schema (`allOf`, `oneOf`, `anyOf`, `not` too); a reference
//! wrapped in `allOf` joins the schema's own `allOf` instead of replacing it; and an
//! operation without its own `consumes`/`produces` uses the document's.

use serde_json::{json, Map, Value};

const V2_DEFINITIONS: &str = "#/definitions/";
const V3_SCHEMAS: &str = "#/components/schemas/";
const OPERATIONS: [&str; 7] = ["get", "put", "post", "delete", "options", "head", "patch"];

/// The OpenAPI 3.0 form of a Swagger 2.0 document.
pub fn v2_to_v3(v2: &Value) -> Value {
    let document = Document {
        parameters: v2.get("parameters").and_then(Value::as_object),
        consumes: v2.get("consumes"),
        produces: v2.get("produces"),
    };
    let mut out = Map::new();
    out.insert("openapi".into(), json!("3.0.0"));
    if let Some(info) = v2.get("info") {
        out.insert("info".into(), info.clone());
    }
    if let Some(docs) = v2.get("externalDocs") {
        out.insert("externalDocs".into(), external_docs(docs));
    }
    if let Some(paths) = v2.get("paths").and_then(Value::as_object) {
        let converted = map_values(paths, |path, item| {
            if path.starts_with("x-") {
                item.clone()
            } else {
                path_item(item, &document)
            }
        });
        out.insert("paths".into(), converted);
    }
    out.insert("components".into(), components(v2));
    Value::Object(out)
}

/// What operations take from the document when they do not say themselves.
struct Document<'a> {
    /// Shared parameters, by name.
    parameters: Option<&'a Map<String, Value>>,
    consumes: Option<&'a Value>,
    produces: Option<&'a Value>,
}

fn components(v2: &Value) -> Value {
    let produces = v2.get("produces");
    let mut components = Map::new();
    let mut section = |from: &str, to: &str, convert: &dyn Fn(&Value) -> Value| {
        if let Some(entries) = v2.get(from).and_then(Value::as_object) {
            components.insert(to.into(), map_values(entries, |_, v| convert(v)));
        }
    };
    section("definitions", "schemas", &schema);
    section("securityDefinitions", "securitySchemes", &security_scheme);
    section("responses", "responses", &|r| response(r, produces));
    Value::Object(components)
}

/// `object` with every value converted by `convert` (given its key too).
fn map_values(object: &Map<String, Value>, convert: impl Fn(&str, &Value) -> Value) -> Value {
    Value::Object(
        object
            .iter()
            .map(|(key, value)| (key.clone(), convert(key, value)))
            .collect(),
    )
}

/// Only the keys named in `keys`, from `from`.
fn pick(from: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| Some((k.to_string(), from.get(*k)?.clone())))
        .collect()
}

/// One content entry per media type `media_types` lists, each with the converted `body`
/// schema (`None` when the operation names no media types).
fn content(media_types: Option<&Value>, body: &Value) -> Option<Value> {
    let media_types = media_types?.as_array()?;
    let entry = json!({ "schema": schema(body) });
    Some(Value::Object(
        media_types
            .iter()
            .filter_map(Value::as_str)
            .map(|media| (media.to_string(), entry.clone()))
            .collect(),
    ))
}

/// Copies the keys named in `keys`, and every `x-` extension, from `from`.
fn copy_keys(from: &Map<String, Value>, keys: &[&str]) -> Map<String, Value> {
    from.iter()
        .filter(|(k, _)| k.starts_with("x-") || keys.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn external_docs(docs: &Value) -> Value {
    match docs.as_object() {
        Some(docs) => Value::Object(copy_keys(docs, &["description", "url"])),
        None => docs.clone(),
    }
}

fn security_scheme(v2: &Value) -> Value {
    let Some(v2) = v2.as_object() else {
        return v2.clone();
    };
    let mut scheme = copy_keys(v2, &["description", "type", "name", "in"]);
    if let Some(flow) = v2
        .get("flow")
        .and_then(Value::as_str)
        .filter(|f| !f.is_empty())
    {
        let oauth = pick(v2, &["authorizationUrl", "tokenUrl", "scopes"]);
        scheme.insert("flows".into(), json!({ flow: oauth }));
    }
    Value::Object(scheme)
}

fn path_item(v2: &Value, document: &Document) -> Value {
    let Some(v2) = v2.as_object() else {
        return v2.clone();
    };
    let mut item = copy_keys(v2, &["$ref"]);
    for method in OPERATIONS {
        if let Some(op) = v2.get(method) {
            item.insert(method.into(), operation(op, document));
        }
    }
    if let Some(parameters) = v2.get("parameters").and_then(Value::as_array) {
        let converted = parameters
            .iter()
            .map(|p| parameter(resolve(p, document.parameters)))
            .collect();
        item.insert("parameters".into(), Value::Array(converted));
    }
    Value::Object(item)
}

/// A parameter given by reference to the document's shared `parameters`, inlined.
fn resolve<'a>(param: &'a Value, shared: Option<&'a Map<String, Value>>) -> &'a Value {
    param
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/parameters/"))
        .and_then(|name| shared?.get(name))
        .unwrap_or(param)
}

fn operation(v2: &Value, document: &Document) -> Value {
    let Some(v2) = v2.as_object() else {
        return v2.clone();
    };
    let mut op = copy_keys(
        v2,
        &[
            "description",
            "tags",
            "summary",
            "deprecated",
            "operationId",
        ],
    );
    if let Some(docs) = v2.get("externalDocs") {
        op.insert("externalDocs".into(), external_docs(docs));
    }
    let mut parameters = Vec::new();
    for param in v2
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let param = resolve(param, document.parameters);
        match param.get("schema") {
            Some(body) if param.get("name").and_then(Value::as_str) == Some("body") => {
                let mut request = Map::new();
                if let Some(content) = content(v2.get("consumes").or(document.consumes), body) {
                    request.insert("content".into(), content);
                }
                op.insert("requestBody".into(), Value::Object(request));
            }
            _ => parameters.push(parameter(param)),
        }
    }
    if !parameters.is_empty() {
        op.insert("parameters".into(), Value::Array(parameters));
    }
    if let Some(responses) = v2.get("responses").and_then(Value::as_object) {
        let produces = v2.get("produces").or(document.produces);
        let converted = map_values(responses, |code, r| {
            if code.starts_with("x-") {
                r.clone()
            } else {
                response(r, produces)
            }
        });
        op.insert("responses".into(), converted);
    }
    Value::Object(op)
}

fn response(v2: &Value, produces: Option<&Value>) -> Value {
    let Some(v2) = v2.as_object() else {
        return v2.clone();
    };
    let mut out = copy_keys(v2, &["description"]);
    if let Some(reference) = v2.get("$ref").and_then(Value::as_str) {
        out.insert(
            "$ref".into(),
            json!(reference.replacen("#/responses/", "#/components/responses/", 1)),
        );
    }
    if let Some(content) = v2.get("schema").and_then(|body| content(produces, body)) {
        out.insert("content".into(), content);
    }
    Value::Object(out)
}

fn parameter(v2: &Value) -> Value {
    let Some(v2) = v2.as_object() else {
        return v2.clone();
    };
    let mut out = copy_keys(
        v2,
        &["name", "description", "in", "required", "allowEmptyValue"],
    );
    if let Some(reference) = v2.get("$ref").and_then(Value::as_str) {
        out.insert(
            "$ref".into(),
            json!(reference.replacen("#/parameters/", "#/components/parameters/", 1)),
        );
        return Value::Object(out);
    }
    let converted = match v2.get("schema") {
        Some(s) => schema(s),
        // A simple parameter's type becomes its schema (kube keeps type, format and
        // uniqueItems only).
        None => Value::Object(pick(v2, &["type", "format", "uniqueItems"])),
    };
    out.insert("schema".into(), converted);
    Value::Object(out)
}

/// A schema with its references moved to `#/components/schemas/`, in every nested schema,
/// and each reference that has sibling keys wrapped in `allOf` (kube's `WrapRefs`).
fn schema(v2: &Value) -> Value {
    let Some(v2) = v2.as_object() else {
        return v2.clone();
    };
    let mut out = Map::with_capacity(v2.len());
    for (key, value) in v2 {
        let converted = match key.as_str() {
            "$ref" => match value.as_str().and_then(|r| r.split_once(V2_DEFINITIONS)) {
                Some((_, name)) => json!(format!("{V3_SCHEMAS}{name}")),
                None => value.clone(),
            },
            "properties" | "patternProperties" | "definitions" => match value.as_object() {
                Some(map) => map_values(map, |_, s| schema(s)),
                None => value.clone(),
            },
            "items" | "allOf" | "anyOf" | "oneOf" => match value.as_array() {
                Some(list) => Value::Array(list.iter().map(schema).collect()),
                None => schema(value),
            },
            "additionalProperties" | "additionalItems" | "not" => schema(value),
            _ => value.clone(),
        };
        out.insert(key.clone(), converted);
    }
    if out.len() > 1 {
        if let Some(reference) = out.remove("$ref") {
            // kube replaces an `allOf` the schema already has; it is kept here.
            let mut all_of = vec![json!({ "$ref": reference })];
            if let Some(Value::Array(existing)) = out.remove("allOf") {
                all_of.extend(existing);
            }
            out.insert("allOf".into(), Value::Array(all_of));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests;
