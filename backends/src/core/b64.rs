//! Base64 as kube-apiserver decodes `[]byte` fields (secret `data`, configmap `binaryData`):
//! Go's `base64.StdEncoding` via `encoding/json`, which requires padding, skips `\r` and
//! `\n`, and reports the offset of the first bad byte. A bad value is a decode error, so
//! kube answers 400 `<Kind> in version "v1" cannot be handled as a <Kind>: illegal base64
//! data at input byte N` before any validation runs.

use base64::Engine;
use serde_json::Value;

use super::causes::key_path;
use crate::status::{ApiError, StatusCause};

const PAD: u8 = b'=';

fn sextet(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

fn is_newline(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

/// Decodes standard, padded base64; `Err(offset)` is the byte Go would report.
pub(crate) fn decode_std(input: &str) -> Result<Vec<u8>, usize> {
    let src = input.as_bytes();
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0;
    while si < src.len() {
        // One quantum: up to four sextets, ending early only at padding.
        let mut buf = [0u8; 4];
        let mut len = 0;
        let mut done = false;
        while len < 4 {
            if si == src.len() {
                if len == 0 {
                    return Ok(out);
                }
                // Padding is required, so a short final quantum is corrupt.
                return Err(si - len);
            }
            let b = src[si];
            si += 1;
            if let Some(v) = sextet(b) {
                buf[len] = v;
                len += 1;
                continue;
            }
            if is_newline(b) {
                continue;
            }
            if b != PAD || len < 2 {
                return Err(si - 1);
            }
            if len == 2 {
                // "==" expected: the second pad may follow newlines.
                while si < src.len() && is_newline(src[si]) {
                    si += 1;
                }
                if si == src.len() {
                    return Err(src.len());
                }
                if src[si] != PAD {
                    return Err(si - 1);
                }
                si += 1;
            }
            while si < src.len() && is_newline(src[si]) {
                si += 1;
            }
            if si < src.len() {
                return Err(si);
            }
            done = true;
            break;
        }
        let val = (u32::from(buf[0]) << 18)
            | (u32::from(buf[1]) << 12)
            | (u32::from(buf[2]) << 6)
            | u32::from(buf[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        out.extend_from_slice(&bytes[..len - 1]);
        if done {
            break;
        }
    }
    Ok(out)
}

/// Standard padded base64, as Go's `encoding/json` writes `[]byte`.
pub(crate) fn encode_std(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The 400 kube answers for an undecodable body of `kind` (always a core/v1 kind here).
pub fn decode_error(kind: &str, offset: usize) -> ApiError {
    ApiError::bad_request(format!(
        "{kind} in version \"v1\" cannot be handled as a {kind}: illegal base64 data at input byte {offset}"
    ))
}

/// Decodes every value of the base64 map at `field` (`data`, `binaryData`), returning the
/// total decoded size or the first failure as kube's 400. `null` decodes to empty.
pub(crate) fn decode_map(kind: &str, object: &Value, field: &str) -> Result<usize, ApiError> {
    let mut total = 0;
    for (_, value) in super::entries(object.get(field)) {
        match value {
            Value::Null => {}
            Value::String(s) => total += decode_std(s).map_err(|at| decode_error(kind, at))?.len(),
            other => {
                let json_kind = match other {
                    Value::Number(_) => "number",
                    Value::Bool(_) => "bool",
                    Value::Array(_) => "array",
                    _ => "object",
                };
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal {json_kind} into Go struct field {kind}.{field} of type []uint8"
                )));
            }
        }
    }
    Ok(total)
}

/// The same failures as validation causes, for a registry that validates without having
/// run the decode check: invalid data must never be stored.
pub(crate) fn decode_causes(object: &Value, field: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    for (key, value) in super::entries(object.get(field)) {
        let offset = match value {
            Value::Null => continue,
            Value::String(s) => match decode_std(s) {
                Ok(_) => continue,
                Err(at) => at,
            },
            _ => 0,
        };
        causes.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: \"<value omitted>\": illegal base64 data at input byte {offset}"
            ),
            field: key_path(field, key),
        });
    }
    causes
}

/// Decoded byte length of a base64 value (0 when undecodable; validation reports that).
pub(crate) fn decoded_len(value: &Value) -> usize {
    value
        .as_str()
        .and_then(|s| decode_std(s).ok())
        .map_or(0, |b| b.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_like_go() {
        assert_eq!(decode_std("aGVsbG8="), Ok(b"hello".to_vec()));
        assert_eq!(decode_std("aGVs\nbG8="), Ok(b"hello".to_vec()));
        assert_eq!(decode_std(""), Ok(Vec::new()));
        assert_eq!(decode_std("aGk="), Ok(b"hi".to_vec()));
        assert_eq!(decode_std("YQ=="), Ok(b"a".to_vec()));
        // Go: "abc" lacks padding → byte 0; "ab!d" → byte 2; trailing garbage after padding.
        assert_eq!(decode_std("abc"), Err(0));
        assert_eq!(decode_std("ab!d"), Err(2));
        assert_eq!(decode_std("YQ==x"), Err(4));
        assert_eq!(decode_std("Y==="), Err(1));
        assert_eq!(decode_std("YQ="), Err(3));
        assert_eq!(encode_std(b"hello"), "aGVsbG8=");
    }

    #[test]
    fn decode_error_wording() {
        let e = decode_map("Secret", &json!({"data": {"a": "aGk=", "b": "!!"}}), "data");
        let e = e.err().map(|e| (e.code, e.message));
        assert_eq!(
            e,
            Some((400, "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 0".into()))
        );
        assert_eq!(
            decode_map("Secret", &json!({"data": {"a": "aGk="}}), "data").ok(),
            Some(2)
        );
        assert_eq!(
            decode_causes(&json!({"data": {"k": "!!"}}), "data")[0].field,
            "data[k]"
        );
    }
}
