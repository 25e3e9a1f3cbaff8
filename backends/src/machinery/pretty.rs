//! kube-apiserver's pretty-printed JSON: when a response is indented (kube's `isPrettyPrint`
//! and the `pretty=1` media type parameter), and the indentation itself, as Go's
//! `json.MarshalIndent(v, "", "  ")` writes it.

/// Whether the request asks for indented JSON apart from its `Accept` header, as kube's
/// `isPrettyPrint` decides: a non-empty `pretty` query parameter decides alone (Go's
/// `strconv.ParseBool`; anything it does not read as true is false), otherwise a user agent
/// that is a person's (curl, Wget, a browser).
pub fn requested(raw_query: Option<&str>, user_agent: Option<&[u8]>) -> bool {
    if let Some(query) = raw_query.filter(|q| q.contains("pretty")) {
        // Go's `url.Values.Get`: the first `pretty=` pair, with its value unescaped.
        let value = query
            .split('&')
            .map(|pair| pair.split_once('=').unwrap_or((pair, "")))
            .find(|(key, _)| *key == "pretty")
            .map(|(_, value)| value);
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            return matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True");
        }
    }
    user_agent.is_some_and(|agent| {
        agent.starts_with(b"curl")
            || agent.starts_with(b"Wget")
            || agent.starts_with(b"Mozilla/5.0")
    })
}

/// `compact` (one JSON document) indented by two spaces per level, as Go's
/// `json.MarshalIndent(v, "", "  ")`: a newline after `{`, `[` and `,`, a space after `:`, and
/// empty objects and arrays left as `{}` and `[]`. Whitespace between tokens is dropped; the
/// insides of strings are copied as they are.
pub fn indent(compact: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(compact.len() + compact.len() / 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    // An opening bracket waits for its first member before the newline, so that an empty
    // container stays on one line.
    let mut opened = false;
    let newline = |out: &mut Vec<u8>, depth: usize| {
        out.push(b'\n');
        out.resize(out.len() + 2 * depth, b' ');
    };
    for &byte in compact {
        if in_string {
            out.push(byte);
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == b'"' {
                in_string = false;
            }
            continue;
        }
        if matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
            continue;
        }
        if byte == b'}' || byte == b']' {
            depth = depth.saturating_sub(1);
            if opened {
                opened = false;
            } else {
                newline(&mut out, depth);
            }
            out.push(byte);
            continue;
        }
        if opened {
            opened = false;
            newline(&mut out, depth);
        }
        out.push(byte);
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                opened = true;
            }
            b',' => newline(&mut out, depth),
            b':' => out.push(b' '),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indents_as_gos_marshal_indent() {
        let compact = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"a \"quoted\" {x:[1,2]}, \\","details":{"causes":[{"field":"a"},{"field":"b"}],"list":[]},"code":404}"#;
        // What Go's json.MarshalIndent(v, "", "  ") writes for the same document.
        let go = r#"{
  "kind": "Status",
  "apiVersion": "v1",
  "metadata": {},
  "status": "Failure",
  "message": "a \"quoted\" {x:[1,2]}, \\",
  "details": {
    "causes": [
      {
        "field": "a"
      },
      {
        "field": "b"
      }
    ],
    "list": []
  },
  "code": 404
}"#;
        assert_eq!(String::from_utf8_lossy(&indent(compact)), go);
    }

    #[test]
    fn indentation_is_idempotent_and_scalars_pass_through() {
        let once = indent(br#"[1,{"a":[true,null]},"x"]"#);
        assert_eq!(indent(&once), once);
        assert_eq!(
            String::from_utf8_lossy(&once),
            "[\n  1,\n  {\n    \"a\": [\n      true,\n      null\n    ]\n  },\n  \"x\"\n]"
        );
        assert_eq!(indent(b"42"), b"42");
    }

    #[test]
    fn pretty_is_asked_for_as_kube_reads_it() {
        assert!(requested(Some("pretty=true"), None));
        assert!(requested(Some("limit=1&pretty=1"), None));
        assert!(!requested(Some("pretty=false"), Some(b"curl/8.5.0")));
        assert!(!requested(Some("pretty=yes"), None));
        // An empty value leaves it to the user agent.
        assert!(requested(Some("pretty="), Some(b"curl/8.5.0")));
        assert!(requested(Some("pretty"), Some(b"Wget/1.21")));
        assert!(requested(None, Some(b"Mozilla/5.0 (X11)")));
        assert!(!requested(None, Some(b"kubectl/v1.32.4 (linux/amd64)")));
        assert!(!requested(Some("prettyish=1"), None));
        assert!(!requested(None, None));
    }
}
