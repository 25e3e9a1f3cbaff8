//! client-go's JSONPath (`k8s.io/client-go/util/jsonpath`) for one `{...}` action, as kube's
//! custom resource table convertor evaluates printer columns with it: fields (a `\` escapes
//! a dot), `['key']` (re-read as `.key`, as client-go does), indexes and slices (negative
//! ones too), `*`, `..`, unions and filters with `==`, `!=`, `<`, `>`, `<=`, `>=` or
//! existence; missing keys find nothing rather than fail.

use std::borrow::Cow;

use serde_json::Value;

/// One parsed step.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Field(String),
    Wildcard,
    Recursive,
    Slice(SliceParams),
    Union(Vec<Vec<Node>>),
    Filter {
        left: Vec<Node>,
        operator: String,
        right: Vec<Node>,
    },
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// An array selection's `[start:end:step]`, as client-go's `ParamsEntry`s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SliceParams {
    start: Option<i64>,
    end: Option<i64>,
    /// `[i]`: the end is `i + 1`, and `[-1]` means the last item.
    end_derived: bool,
    step: Option<i64>,
}

/// Parses the inside of one action (`.status.conditions[?(@.type=="Ready")].status`).
pub fn parse(action: &str) -> Result<Vec<Node>, String> {
    parse_nested(action, 0)
}

/// How deep unions and filters may nest (each level parses its part again): a path from a
/// CRD must not take the stack.
const MAX_NESTING: usize = 32;

fn parse_nested(action: &str, depth: usize) -> Result<Vec<Node>, String> {
    if depth > MAX_NESTING {
        return Err("the path nests too deeply".into());
    }
    let mut parser = Parser {
        chars: action.chars().collect(),
        pos: 0,
        nodes: Vec::new(),
        depth,
    };
    parser.parse_all()?;
    Ok(parser.nodes)
}

/// The field names of a path that is only fields (`.spec.replicas`), as scale and selectable
/// field paths are.
pub fn field_names(path: &str) -> Vec<String> {
    parse(path)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|node| match node {
            Node::Field(name) => Some(name),
            _ => None,
        })
        .collect()
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    nodes: Vec<Node>,
    depth: usize,
}

fn is_terminator(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\r' | '\n' | '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}'
    )
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

impl Parser {
    fn at(&self, prefix: &str) -> bool {
        let rest = &self.chars[self.pos..];
        prefix.chars().count() <= rest.len() && prefix.chars().zip(rest).all(|(a, b)| a == *b)
    }

    fn parse_all(&mut self) -> Result<(), String> {
        while self.pos < self.chars.len() {
            if self.at("[?(") {
                self.pos += 3;
                self.parse_filter()?;
                continue;
            }
            if self.at("..") {
                if self.nodes.last() == Some(&Node::Recursive) {
                    return Err("invalid multiple recursive descent".into());
                }
                self.pos += 2;
                self.nodes.push(Node::Recursive);
                if self
                    .chars
                    .get(self.pos)
                    .is_some_and(|c| is_alphanumeric(*c))
                {
                    self.parse_field();
                }
                continue;
            }
            let c = self.chars[self.pos];
            self.pos += 1;
            match c {
                '\r' | '\n' => return Err("unclosed action".into()),
                ' ' | '@' | '$' => {}
                '[' => self.parse_array()?,
                '"' | '\'' => self.parse_quote(c)?,
                '.' => self.parse_field(),
                '+' | '-' => {
                    self.pos -= 1;
                    self.parse_number()?;
                }
                c if c.is_ascii_digit() => {
                    self.pos -= 1;
                    self.parse_number()?;
                }
                c if is_alphanumeric(c) => {
                    self.pos -= 1;
                    self.parse_identifier()?;
                }
                other => {
                    return Err(format!(
                        "unrecognized character in action: U+{:04X} '{other}'",
                        u32::from(other)
                    ))
                }
            }
        }
        Ok(())
    }

    /// A field name up to the next unescaped terminator; `\` escapes the character after it.
    fn parse_field(&mut self) {
        let mut raw = String::new();
        while let Some(&c) = self.chars.get(self.pos) {
            if c == '\\' {
                raw.push(c);
                self.pos += 1;
                if let Some(&escaped) = self.chars.get(self.pos) {
                    raw.push(escaped);
                    self.pos += 1;
                }
                continue;
            }
            if is_terminator(c) {
                break;
            }
            raw.push(c);
            self.pos += 1;
        }
        if raw == "*" {
            self.nodes.push(Node::Wildcard);
        } else {
            self.nodes.push(Node::Field(raw.replace('\\', "")));
        }
    }

    fn parse_number(&mut self) -> Result<(), String> {
        let start = self.pos;
        if matches!(self.chars.get(self.pos), Some('+' | '-')) {
            self.pos += 1;
        }
        while self
            .chars
            .get(self.pos)
            .is_some_and(|c| *c == '.' || c.is_ascii_digit())
        {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        if let Ok(i) = text.parse::<i64>() {
            self.nodes.push(Node::Int(i));
        } else if let Ok(f) = text.parse::<f64>() {
            self.nodes.push(Node::Float(f));
        } else {
            return Err(format!("cannot parse number {text}"));
        }
        Ok(())
    }

    fn parse_identifier(&mut self) -> Result<(), String> {
        let start = self.pos;
        while self.chars.get(self.pos).is_some_and(|c| !is_terminator(*c)) {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        match text.as_str() {
            "true" => self.nodes.push(Node::Bool(true)),
            "false" => self.nodes.push(Node::Bool(false)),
            // `range`/`end` and the like are templates' business, not a column's.
            other => return Err(format!("unrecognized identifier {other}")),
        }
        Ok(())
    }

    fn parse_quote(&mut self, quote: char) -> Result<(), String> {
        let start = self.pos;
        loop {
            match self.chars.get(self.pos) {
                None | Some('\n') => return Err("unterminated quoted string".into()),
                Some(&c) => {
                    self.pos += 1;
                    if c == quote && self.chars[self.pos - 2] != '\\' {
                        break;
                    }
                }
            }
        }
        let inner: String = self.chars[start..self.pos - 1].iter().collect();
        self.nodes.push(Node::Text(unescape(&inner)));
        Ok(())
    }

    fn parse_array(&mut self) -> Result<(), String> {
        let start = self.pos;
        loop {
            match self.chars.get(self.pos) {
                None | Some('\n') => return Err("unterminated array".into()),
                Some(']') => break,
                Some(_) => self.pos += 1,
            }
        }
        let mut text: String = self.chars[start..self.pos].iter().collect();
        self.pos += 1;
        if text == "*" {
            text = ":".into();
        }
        let parts: Vec<&str> = text.split(',').collect();
        if parts.len() > 1 {
            let union = parts
                .iter()
                .map(|part| parse_nested(&format!("[{}]", part.trim_matches(' ')), self.depth + 1))
                .collect::<Result<Vec<_>, _>>()?;
            self.nodes.push(Node::Union(union));
            return Ok(());
        }
        // `['key']` is read again as `.key` (so a dotted key is several fields unless its dots
        // are escaped), as client-go reads it.
        if let Some(key) = text
            .strip_prefix('\'')
            .and_then(|t| t.strip_suffix('\''))
            .filter(|k| !k.contains('\''))
        {
            self.nodes
                .extend(parse_nested(&format!(".{key}"), self.depth + 1)?);
            return Ok(());
        }
        self.nodes.push(Node::Slice(parse_slice(&text)?));
        Ok(())
    }

    fn parse_filter(&mut self) -> Result<(), String> {
        let start = self.pos;
        let (mut begun, mut ended, mut pair) = (false, false, '\0');
        loop {
            let Some(&c) = self.chars.get(self.pos) else {
                return Err("unterminated filter".into());
            };
            self.pos += 1;
            match c {
                '\n' => return Err("unterminated filter".into()),
                '"' | '\'' if !begun => {
                    begun = true;
                    pair = c;
                }
                '"' | '\'' if self.chars[self.pos - 2] != '\\' && c == pair => ended = true,
                ')' if begun == ended => break,
                _ => {}
            }
        }
        if self.chars.get(self.pos) != Some(&']') {
            return Err("unclosed array expect ]".into());
        }
        self.pos += 1;
        let text: String = self.chars[start..self.pos - 2].iter().collect();
        // client-go's `^([^!<>=]+)([!<>=]+)(.+?)$`.
        let split = text
            .find(['!', '<', '>', '='])
            .filter(|&i| i > 0)
            .and_then(|i| {
                let op_len = text[i..]
                    .find(|c| !matches!(c, '!' | '<' | '>' | '='))
                    .filter(|&n| i + n < text.len())?;
                Some((&text[..i], &text[i..i + op_len], &text[i + op_len..]))
            });
        let node = match split {
            None => Node::Filter {
                left: parse_nested(&text, self.depth + 1)?,
                operator: "exists".into(),
                right: Vec::new(),
            },
            Some((left, operator, right)) => Node::Filter {
                left: parse_nested(left, self.depth + 1)?,
                operator: operator.to_string(),
                right: parse_nested(right, self.depth + 1)?,
            },
        };
        self.nodes.push(node);
        Ok(())
    }
}

/// client-go's `^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$` and its reading of the three parts.
fn parse_slice(text: &str) -> Result<SliceParams, String> {
    let invalid = || format!("invalid array index {text}");
    let mut parts = text.split(':');
    let first = parts.next().unwrap_or("");
    let second = parts.next();
    let third = parts.next();
    if parts.next().is_some() {
        return Err(invalid());
    }
    let number = |s: &str| -> Result<Option<i64>, String> {
        let digits = s.strip_prefix('-').unwrap_or(s);
        if !digits.chars().all(|c| c.is_ascii_digit()) {
            return Err(invalid());
        }
        if s.is_empty() {
            return Ok(None);
        }
        s.parse::<i64>()
            .map(Some)
            .map_err(|_| format!("array index {s} is not a number"))
    };
    let start = number(first)?;
    let (end, end_derived) = match second {
        Some(s) => (number(s)?, false),
        None => (
            Some(start.unwrap_or(0).checked_add(1).ok_or_else(invalid)?),
            true,
        ),
    };
    let step = match third {
        Some(s) => number(s)?,
        None => None,
    };
    Ok(SliceParams {
        start,
        end,
        end_derived,
        step,
    })
}

/// Go's `strconv.Unquote`-like reading of a quoted text's escapes (client-go's
/// `UnquoteExtend`): `\"`, `\'`, `\\`, `\n`, `\t`.
fn unescape(inner: &str) -> String {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// The values `nodes` find in `root`, in client-go's order (an object's members in their
/// order here, where Go's map order is random); an evaluation error (an index out of range,
/// a filter on something that is not a list, values that cannot be compared) is `Err`.
pub fn find<'a>(root: &'a Value, nodes: &[Node]) -> Result<Vec<Cow<'a, Value>>, String> {
    eval(vec![Cow::Borrowed(root)], nodes)
}

fn eval<'a>(input: Vec<Cow<'a, Value>>, nodes: &[Node]) -> Result<Vec<Cow<'a, Value>>, String> {
    let mut current = input;
    for node in nodes {
        current = step(current, node)?;
    }
    Ok(current)
}

fn children<'a>(value: &Cow<'a, Value>) -> Vec<Cow<'a, Value>> {
    match value {
        Cow::Borrowed(Value::Object(map)) => map.values().map(Cow::Borrowed).collect(),
        Cow::Borrowed(Value::Array(items)) => items.iter().map(Cow::Borrowed).collect(),
        Cow::Owned(Value::Object(map)) => map.values().cloned().map(Cow::Owned).collect(),
        Cow::Owned(Value::Array(items)) => items.iter().cloned().map(Cow::Owned).collect(),
        _ => Vec::new(),
    }
}

fn step<'a>(input: Vec<Cow<'a, Value>>, node: &Node) -> Result<Vec<Cow<'a, Value>>, String> {
    let mut out = Vec::new();
    match node {
        Node::Field(name) => {
            for value in input {
                match value {
                    Cow::Borrowed(Value::Object(map)) => {
                        out.extend(map.get(name.as_str()).map(Cow::Borrowed))
                    }
                    Cow::Owned(Value::Object(mut map)) => {
                        out.extend(map.remove(name.as_str()).map(Cow::Owned))
                    }
                    _ => {}
                }
            }
        }
        Node::Wildcard => {
            for value in &input {
                out.extend(children(value));
            }
        }
        Node::Recursive => {
            let mut pending = input;
            while !pending.is_empty() {
                let mut next = Vec::new();
                for value in pending {
                    let kids = children(&value);
                    if !kids.is_empty() {
                        out.push(value);
                        next.extend(kids);
                    }
                }
                pending = next;
            }
        }
        Node::Slice(params) => {
            for value in input {
                if value.is_null() {
                    continue;
                }
                let items: Vec<Cow<'a, Value>> = match &value {
                    Cow::Borrowed(Value::Array(items)) => items.iter().map(Cow::Borrowed).collect(),
                    Cow::Owned(Value::Array(items)) => {
                        items.iter().cloned().map(Cow::Owned).collect()
                    }
                    _ => return Err("value is not array or slice".into()),
                };
                out.extend(slice(items, params)?);
            }
        }
        Node::Union(lists) => {
            for list in lists {
                out.extend(eval(input.clone(), list)?);
            }
        }
        Node::Filter {
            left,
            operator,
            right,
        } => {
            for value in input {
                let items = match &value {
                    Cow::Borrowed(Value::Array(items)) => items.iter().collect::<Vec<_>>(),
                    Cow::Owned(Value::Array(items)) => items.iter().collect(),
                    _ => return Err("value is not array or slice and cannot be filtered".into()),
                };
                let mut kept = Vec::new();
                for (index, item) in items.into_iter().enumerate() {
                    let lefts = eval(vec![Cow::Borrowed(item)], left);
                    if operator == "exists" {
                        if lefts.is_ok_and(|l| !l.is_empty()) {
                            kept.push(index);
                        }
                        continue;
                    }
                    let lefts = lefts?;
                    let left = match lefts.as_slice() {
                        [] => continue,
                        [one] => one.clone().into_owned(),
                        _ => return Err("can only compare one element at a time".into()),
                    };
                    let rights = eval(vec![Cow::Borrowed(item)], right)?;
                    let right = match rights.as_slice() {
                        [] => continue,
                        [one] => one.clone().into_owned(),
                        _ => return Err("can only compare one element at a time".into()),
                    };
                    if compare(&left, operator, &right)? {
                        kept.push(index);
                    }
                }
                for index in kept {
                    out.push(match &value {
                        Cow::Borrowed(Value::Array(items)) => Cow::Borrowed(&items[index]),
                        Cow::Owned(Value::Array(items)) => Cow::Owned(items[index].clone()),
                        _ => continue,
                    });
                }
            }
        }
        Node::Text(text) => out.push(Cow::Owned(Value::String(text.clone()))),
        Node::Int(i) => out.push(Cow::Owned(Value::from(*i))),
        Node::Float(f) => out.push(Cow::Owned(
            serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        )),
        Node::Bool(b) => out.push(Cow::Owned(Value::Bool(*b))),
    }
    Ok(out)
}

/// client-go's `evalArray`: bounds checked as it checks them.
fn slice<'a>(
    items: Vec<Cow<'a, Value>>,
    params: &SliceParams,
) -> Result<Vec<Cow<'a, Value>>, String> {
    let len = items.len() as i64;
    let mut start = params.start.unwrap_or(0);
    if start < 0 {
        start += len;
    }
    let mut end = params.end.unwrap_or(len);
    if end < 0 || (end == 0 && params.end_derived) {
        end += len;
    }
    if end == start {
        return Ok(Vec::new());
    }
    if start >= len || start < 0 {
        return Err(format!(
            "array index out of bounds: index {start}, length {len}"
        ));
    }
    if end > len || end < 0 {
        return Err(format!(
            "array index out of bounds: index {}, length {len}",
            end - 1
        ));
    }
    if start > end {
        return Err(format!(
            "starting index {start} is greater than ending index {end}"
        ));
    }
    let step = match params.step {
        Some(s) if s <= 0 => return Err("step must be > 0".into()),
        Some(s) => s as usize,
        None => 1,
    };
    Ok(items
        .into_iter()
        .skip(start as usize)
        .take((end - start) as usize)
        .step_by(step)
        .collect())
}

/// Go template's comparisons as client-go's fork has them: values of one basic kind (an
/// integer and a float are not), booleans for equality only.
fn compare(left: &Value, operator: &str, right: &Value) -> Result<bool, String> {
    use std::cmp::Ordering;
    let ordering = match (left, right) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Number(a), Value::Number(b)) if a.is_f64() == b.is_f64() => {
            match (a.as_i64(), b.as_i64()) {
                (Some(x), Some(y)) => Some(x.cmp(&y)),
                _ => a
                    .as_f64()
                    .zip(b.as_f64())
                    .and_then(|(x, y)| x.partial_cmp(&y)),
            }
        }
        (Value::Bool(a), Value::Bool(b)) => {
            return match operator {
                "==" => Ok(a == b),
                "!=" => Ok(a != b),
                _ => Err("invalid type for comparison".into()),
            }
        }
        _ => return Err("incompatible types for comparison".into()),
    };
    let ordering = ordering.ok_or("incompatible types for comparison")?;
    Ok(match operator {
        "==" => ordering == Ordering::Equal,
        "!=" => ordering != Ordering::Equal,
        "<" => ordering == Ordering::Less,
        ">" => ordering == Ordering::Greater,
        "<=" => ordering != Ordering::Greater,
        ">=" => ordering != Ordering::Less,
        other => return Err(format!("unrecognized filter operator {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn first(object: &Value, path: &str) -> Option<Value> {
        let nodes = parse(path).expect("parses");
        find(object, &nodes)
            .ok()
            .and_then(|found| found.first().map(|v| v.clone().into_owned()))
    }

    fn object() -> Value {
        json!({
            "metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1", "app": "web"}},
            "a": {"conds": [
                {"type": "Synced", "status": "False", "n": 1},
                {"type": "Ready", "status": "True", "n": 5}
            ]},
        })
    }

    #[test]
    fn fields_escapes_and_quoted_keys_as_client_go_reads_them() {
        let o = object();
        assert_eq!(
            first(&o, r".metadata.labels.cluster\.x-k8s\.io/cluster-name"),
            Some(json!("c1"))
        );
        assert_eq!(
            first(&o, r".metadata.labels['cluster\.x-k8s\.io/cluster-name']"),
            Some(json!("c1"))
        );
        // An unescaped dotted key in brackets is several fields to client-go.
        assert_eq!(
            first(&o, ".metadata.labels['cluster.x-k8s.io/cluster-name']"),
            None
        );
        assert_eq!(first(&o, ".metadata.labels['app']"), Some(json!("web")));
        assert_eq!(first(&o, ".metadata.missing.deeper"), None);
    }

    #[test]
    fn indexes_slices_filters_and_descent() {
        let o = object();
        assert_eq!(first(&o, ".a.conds[1].type"), Some(json!("Ready")));
        assert_eq!(first(&o, ".a.conds[-1].type"), Some(json!("Ready")));
        assert_eq!(first(&o, ".a.conds[-1:].type"), Some(json!("Ready")));
        assert_eq!(first(&o, ".a.conds[0:1].type"), Some(json!("Synced")));
        assert_eq!(first(&o, ".a.conds[*].type"), Some(json!("Synced")));
        assert_eq!(
            first(&o, r#".a.conds[?(@.type=="Ready")].status"#),
            Some(json!("True"))
        );
        assert_eq!(
            first(&o, r#".a.conds[?(@.type!="Ready")].type"#),
            Some(json!("Synced"))
        );
        assert_eq!(first(&o, ".a.conds[?(@.n>2)].type"), Some(json!("Ready")));
        assert_eq!(first(&o, ".a.conds[?(@.n<=1)].type"), Some(json!("Synced")));
        assert_eq!(first(&o, ".a.conds[?(@.n)].type"), Some(json!("Synced")));
        assert_eq!(first(&o, "..status"), Some(json!("False")));
        assert_eq!(first(&o, ".a.conds[0,1].type"), Some(json!("Synced")));
        // Out of range is an error (an empty cell), as client-go's.
        assert_eq!(first(&o, ".a.conds[5].type"), None);
        assert!(find(&o, &parse(".a.conds[5]").expect("parses")).is_err());
        // An integer and a float do not compare.
        assert!(find(&o, &parse(".a.conds[?(@.n>1.5)]").expect("parses")).is_err());
    }

    #[test]
    fn long_unterminated_paths_fail_cleanly() {
        let deep = format!(".a{}", "[?(@.b".repeat(100_000));
        assert!(parse(&deep).is_err());
    }

    #[test]
    fn field_only_paths() {
        assert_eq!(field_names(".spec.replicas"), ["spec", "replicas"]);
        assert!(parse(".a[").is_err());
        assert!(parse(r#".a["x"]"#).is_err());
    }
}
