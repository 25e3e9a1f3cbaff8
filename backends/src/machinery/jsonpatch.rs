//! RFC 6902 JSON patch operations applied with the leniencies of the library kube-apiserver
//! 1.33 applies them with (evanphx/json-patch v4), so that a patch kube accepts is accepted
//! here too: `replace` of a missing object member adds it, `copy` from a missing member
//! copies `null`, a `test` of a missing member against `null` passes, negative array indices
//! count from the end, a missing `value` is `null`, path segments before the first `/` are
//! ignored, and replacing the whole document with a scalar changes nothing. As in kube, what
//! `copy` operations copy may not add up to more than 3 MiB (`JSONPatchMaxCopyBytes`: each
//! copy can double the document). The caller turns any error into kube's generic 422.

use serde_json::{Map, Value};

/// Why an operation did not apply (kube does not show it; kept for logs and tests).
pub type OpError = String;

/// kube-apiserver's `JSONPatchMaxCopyBytes`: the most all of a patch's copies may add.
const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// The length of `value` as JSON, counted without building the text.
fn serialized_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing into a counter cannot fail; a value that could not be written counts as huge.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// Applies `operations` (each a JSON object; anything else is an unknown operation) to `doc`
/// in order. On error `doc` may be partly patched: apply to a copy.
pub fn apply(doc: &mut Value, operations: &[Value]) -> Result<(), OpError> {
    let empty = Map::new();
    let mut copied = 0usize;
    for op in operations {
        let op = op.as_object().unwrap_or(&empty);
        let kind = match op.get("op") {
            Some(Value::String(kind)) => kind.as_str(),
            _ => "unknown",
        };
        match kind {
            "add" => add(doc, &path(op, "path")?, value(op)),
            "remove" => remove(doc, &path(op, "path")?).map(drop),
            "replace" => replace(doc, &path(op, "path")?, value(op)),
            "move" => {
                let moved = remove(doc, &path(op, "from")?)?;
                add(doc, &path(op, "path")?, moved)
            }
            "copy" => {
                let value = get(doc, &path(op, "from")?)?
                    .cloned()
                    .unwrap_or(Value::Null);
                copied = copied.saturating_add(serialized_len(&value));
                if copied > MAX_COPY_BYTES {
                    return Err(format!(
                        "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_COPY_BYTES}"
                    ));
                }
                add(doc, &path(op, "path")?, value)
            }
            "test" => test(doc, &path(op, "path")?, op.get("value")),
            other => Err(format!("Unexpected kind: {other}")),
        }?;
    }
    Ok(())
}

/// An operation's `path` or `from`: a string (`null` or absent is an error, as a number is).
fn path(op: &Map<String, Value>, field: &str) -> Result<String, OpError> {
    match op.get(field) {
        Some(Value::String(path)) => Ok(path.clone()),
        _ => Err(format!("operation missing {field} field")),
    }
}

/// An operation's `value`; absent is `null`.
fn value(op: &Map<String, Value>) -> Value {
    op.get("value").cloned().unwrap_or(Value::Null)
}

/// RFC 6901 unescaping, in one pass (`~01` is `~1`).
fn unescape(segment: &str) -> String {
    if !segment.contains('~') {
        return segment.to_string();
    }
    let mut out = String::with_capacity(segment.len());
    let mut chars = segment.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('~', Some('1')) => {
                out.push('/');
                chars.next();
            }
            ('~', Some('0')) => {
                out.push('~');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

/// The container the path's last segment is in, and that segment. `None` when the path has
/// no `/`, or a segment before the last is missing, `null` or not a container.
fn parent<'d>(doc: &'d mut Value, path: &str) -> Option<(&'d mut Value, String)> {
    let segments: Vec<&str> = path.split('/').collect();
    let (last, inner) = segments.split_last()?;
    // The first segment is what precedes the first `/`: never looked at.
    let inner = inner.get(1..)?;
    let mut current = doc;
    for segment in inner {
        let segment = unescape(segment);
        let next = match current {
            Value::Object(members) => members.get_mut(&segment),
            Value::Array(items) => existing_index(items.len(), &segment)
                .ok()
                .and_then(|i| items.get_mut(i)),
            _ => None,
        };
        current = match next {
            Some(next @ (Value::Object(_) | Value::Array(_))) => next,
            _ => return None,
        };
    }
    Some((current, unescape(last)))
}

fn missing(op: &str, path: &str) -> OpError {
    format!("{op} operation does not apply: doc is missing path: {path}")
}

/// Go's `strconv.Atoi`.
fn parse_index(segment: &str) -> Result<i64, OpError> {
    segment
        .parse::<i64>()
        .map_err(|_| format!("value was not a proper array index: '{segment}'"))
}

/// The index of an existing element; negative counts from the end.
fn existing_index(len: usize, segment: &str) -> Result<usize, OpError> {
    let index = parse_index(segment)?;
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let index = if index < 0 { index + len } else { index };
    if index < 0 || index >= len {
        return Err(format!("Unable to access invalid index: {segment}"));
    }
    usize::try_from(index).map_err(|_| format!("Unable to access invalid index: {segment}"))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), OpError> {
    let (container, key) = parent(doc, path).ok_or_else(|| missing("add", path))?;
    match container {
        Value::Object(members) => {
            members.insert(key, value);
            Ok(())
        }
        Value::Array(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            // An insertion point: one past the end is allowed, and so is -(len + 1).
            let index = parse_index(&key)?;
            let slots = i64::try_from(items.len()).unwrap_or(i64::MAX) + 1;
            let index = if index < 0 { index + slots } else { index };
            if index < 0 || index >= slots {
                return Err(format!("Unable to access invalid index: {key}"));
            }
            let index = usize::try_from(index).map_err(|_| format!("bad index {key}"))?;
            items.insert(index, value);
            Ok(())
        }
        _ => Err(missing("add", path)),
    }
}

/// Removes the member or element at `path` and returns it.
fn remove(doc: &mut Value, path: &str) -> Result<Value, OpError> {
    let (container, key) = parent(doc, path).ok_or_else(|| missing("remove", path))?;
    match container {
        Value::Object(members) => members
            .shift_remove(&key)
            .ok_or_else(|| format!("Unable to remove nonexistent key: {key}")),
        Value::Array(items) => {
            let index = existing_index(items.len(), &key)?;
            Ok(items.remove(index))
        }
        _ => Err(missing("remove", path)),
    }
}

fn replace(doc: &mut Value, path: &str, value: Value) -> Result<(), OpError> {
    if path.is_empty() {
        // The library's error for a scalar wraps a nil error, which is no error: the
        // document stays as it is.
        if value.is_object() || value.is_array() {
            *doc = value;
        }
        return Ok(());
    }
    let (container, key) = parent(doc, path).ok_or_else(|| missing("replace", path))?;
    match container {
        // A missing member is not an error: it is set.
        Value::Object(members) => {
            members.insert(key, value);
            Ok(())
        }
        Value::Array(items) => {
            let index = existing_index(items.len(), &key)?;
            items[index] = value;
            Ok(())
        }
        _ => Err(missing("replace", path)),
    }
}

/// The value at `path`: `None` for a missing object member (not an error), an error for a
/// missing path or array element.
fn get<'d>(doc: &'d mut Value, path: &str) -> Result<Option<&'d Value>, OpError> {
    let (container, key) = parent(doc, path).ok_or_else(|| missing("copy", path))?;
    match container {
        Value::Object(members) => Ok(members.get(&key)),
        Value::Array(items) => {
            let index = existing_index(items.len(), &key)?;
            Ok(items.get(index))
        }
        _ => Err(missing("copy", path)),
    }
}

fn test(doc: &mut Value, path: &str, expected: Option<&Value>) -> Result<(), OpError> {
    let failed = || format!("testing value {path} failed");
    if path.is_empty() {
        return match expected {
            Some(expected) if expected == doc => Ok(()),
            _ => Err(failed()),
        };
    }
    let (container, key) = parent(doc, path).ok_or_else(|| missing("test", path))?;
    let found = match container {
        Value::Object(members) => members.get(&key),
        Value::Array(items) => items.get(existing_index(items.len(), &key)?),
        _ => return Err(missing("test", path)),
    };
    // A missing or null member equals a `null` value.
    match (found.filter(|v| !v.is_null()), expected) {
        (None, Some(Value::Null)) => Ok(()),
        (Some(found), Some(expected)) if found == expected => Ok(()),
        _ => Err(failed()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patched(doc: Value, ops: Value) -> Result<Value, OpError> {
        let mut doc = doc;
        apply(&mut doc, ops.as_array().expect("ops"))?;
        Ok(doc)
    }

    #[test]
    fn rfc_operations() {
        let doc = json!({"a": {"b": [1, 2, 3]}, "c": "x", "t~/": 1});
        let out = patched(
            doc,
            json!([
                {"op": "add", "path": "/a/b/1", "value": 9},
                {"op": "add", "path": "/a/b/-", "value": 4},
                {"op": "remove", "path": "/a/b/0"},
                {"op": "replace", "path": "/c", "value": "y"},
                {"op": "move", "from": "/c", "path": "/d"},
                {"op": "copy", "from": "/d", "path": "/a/e"},
                {"op": "test", "path": "/t~0~1", "value": 1},
                {"op": "remove", "path": "/t~0~1"}
            ]),
        )
        .expect("applies");
        assert_eq!(out, json!({"a": {"b": [9, 2, 3, 4], "e": "y"}, "d": "y"}));
    }

    #[test]
    fn kubes_leniencies() {
        // replace of a missing member adds it; test of a missing member against null passes.
        let out = patched(
            json!({"data": {}}),
            json!([
                {"op": "replace", "path": "/data/zz", "value": "x"},
                {"op": "test", "path": "/data/nothere", "value": null},
                {"op": "copy", "from": "/data/absent", "path": "/data/copied"},
                {"op": "add", "path": "/data/novalue"}
            ]),
        )
        .expect("applies");
        assert_eq!(
            out,
            json!({"data": {"zz": "x", "copied": null, "novalue": null}})
        );
        // Negative indices count from the end (add: -1 appends).
        let out = patched(
            json!({"l": ["a", "b", "c"]}),
            json!([
                {"op": "add", "path": "/l/-1", "value": "z"},
                {"op": "replace", "path": "/l/-2", "value": "C"},
                {"op": "remove", "path": "/l/-4"}
            ]),
        )
        .expect("applies");
        assert_eq!(out, json!({"l": ["b", "C", "z"]}));
        // What precedes the first slash is not looked at.
        let out = patched(
            json!({"a": 1}),
            json!([{"op": "add", "path": "x/b", "value": 2}]),
        )
        .expect("applies");
        assert_eq!(out, json!({"a": 1, "b": 2}));
    }

    #[test]
    fn what_kube_refuses() {
        let doc = json!({"data": {"k": "v"}, "l": [1], "s": "str"});
        for ops in [
            json!([{"op": "remove", "path": "/data/missing"}]),
            json!([{"op": "add", "path": "/nope/x", "value": 1}]),
            json!([{"op": "add", "path": "/s/x", "value": 1}]),
            json!([{"op": "add", "path": "/l/3", "value": 1}]),
            json!([{"op": "add", "path": "/l/-3", "value": 1}]),
            json!([{"op": "replace", "path": "/l/1", "value": 1}]),
            json!([{"op": "remove", "path": "/l/x"}]),
            json!([{"op": "test", "path": "/data/k", "value": "w"}]),
            json!([{"op": "test", "path": "/data/k"}]),
            json!([{"op": "test", "path": "/data/missing", "value": "v"}]),
            json!([{"op": "move", "from": "/data/missing", "path": "/x"}]),
            json!([{"op": "add", "value": 1}]),
            json!([{"op": "frobnicate", "path": "/x"}]),
            json!([{"path": "/x"}]),
            json!([{"op": "add", "path": "nopath", "value": 1}]),
        ] {
            assert!(patched(doc.clone(), ops.clone()).is_err(), "{ops}");
        }
    }

    #[test]
    fn copies_may_not_add_up_to_more_than_kubes_limit() {
        // Each copy of the object into itself doubles it.
        let doc = json!({"a": {"k": "x".repeat(1024)}});
        let ops: Vec<Value> = (0..40)
            .map(|i| json!({"op": "copy", "from": "/a", "path": format!("/a/c{i}")}))
            .collect();
        let error = patched(doc.clone(), Value::Array(ops)).expect_err("limited");
        assert!(error.contains("exceeding the limit 3145728"), "{error}");
        // A small copy is fine.
        let out =
            patched(doc, json!([{"op": "copy", "from": "/a/k", "path": "/b"}])).expect("copies");
        assert_eq!(out["b"].as_str().map(str::len), Some(1024));
    }

    #[test]
    fn a_test_without_value_fails() {
        let error = patched(json!({"a": 1}), json!([{"op": "test", "path": "/missing"}]));
        assert!(error.is_err());
    }

    #[test]
    fn whole_document_replace_and_test() {
        let out = patched(
            json!({"a": 1}),
            json!([
                {"op": "test", "path": "", "value": {"a": 1}},
                {"op": "replace", "path": "", "value": {"b": 2}}
            ]),
        )
        .expect("applies");
        assert_eq!(out, json!({"b": 2}));
        // A scalar for the whole document changes nothing (kube's library wraps a nil error).
        let out = patched(
            json!({"a": 1}),
            json!([{"op": "replace", "path": "", "value": 5}]),
        )
        .expect("applies");
        assert_eq!(out, json!({"a": 1}));
    }
}
