//! YAML as kube-apiserver reads and writes it: sigs.k8s.io/yaml over go-yaml v2, whose
//! scalars are YAML 1.1's (`yes`, `on`, `0755`, `1_000`, `2024-01-02`), written by libyaml's
//! emitter. What kubegate writes reads back as the same strings in kubectl, client-go and
//! PyYAML, and what a client sends means what it means to kube-apiserver.

use std::collections::{HashMap, HashSet};

use base64::Engine;
use libyaml_safer::{
    Emitter, Encoding, ErrorKind, Event, EventData, MappingStyle, Parser, ScalarStyle,
    SequenceStyle,
};
use serde_json::{Map, Number, Value};

const TAG_PREFIX: &str = "tag:yaml.org,2002:";
const STR: &str = "tag:yaml.org,2002:str";
const BOOL: &str = "tag:yaml.org,2002:bool";
const INT: &str = "tag:yaml.org,2002:int";
const FLOAT: &str = "tag:yaml.org,2002:float";
const NULL: &str = "tag:yaml.org,2002:null";
const TIMESTAMP: &str = "tag:yaml.org,2002:timestamp";
const BINARY: &str = "tag:yaml.org,2002:binary";
const MERGE: &str = "tag:yaml.org,2002:merge";

/// What a scalar means to go-yaml v2's `resolve`.
#[derive(Debug, Clone, PartialEq)]
enum Resolved {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    /// A date or time; go-yaml v2 hands it on as the text it was.
    Timestamp,
    Str,
}

/// go-yaml v2's `resolve("", s)` for a plain scalar; `timestamps`: dates are recognized
/// (they are unless the scalar is explicitly tagged otherwise).
fn resolve_plain(s: &str, timestamps: bool) -> Resolved {
    let hint = match s.as_bytes().first() {
        None => b'N',
        Some(b'+' | b'-') => b'S',
        Some(b'0'..=b'9') => b'D',
        Some(c) if b"yYnNtTfFoO~".contains(c) => b'M',
        Some(b'.') => b'.',
        Some(_) => return Resolved::Str,
    };
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Resolved::Bool(true)
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Resolved::Bool(false)
        }
        "" | "~" | "null" | "Null" | "NULL" => return Resolved::Null,
        ".nan" | ".NaN" | ".NAN" => return Resolved::Float(f64::NAN),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return Resolved::Float(f64::INFINITY)
        }
        "-.inf" | "-.Inf" | "-.INF" => return Resolved::Float(f64::NEG_INFINITY),
        _ => {}
    }
    match hint {
        b'.' => match go_parse_float(s) {
            Some(f) => Resolved::Float(f),
            None => Resolved::Str,
        },
        b'D' | b'S' => {
            if timestamps && is_timestamp(s) {
                return Resolved::Timestamp;
            }
            let plain = s.replace('_', "");
            if let Some(i) = go_parse_int(&plain) {
                return i;
            }
            if yaml_style_float(&plain) {
                if let Some(f) = go_parse_float(&plain) {
                    return Resolved::Float(f);
                }
            }
            Resolved::Str
        }
        _ => Resolved::Str,
    }
}

/// go-yaml v2's `resolve(tag, s)`: an explicit tag must agree with what the text is (an int
/// may be a float); tags it does not resolve (`!!binary`, custom ones) keep the text.
fn resolve_tagged(tag: &str, s: &str) -> Result<Resolved, String> {
    if !matches!(tag, STR | BOOL | INT | FLOAT | NULL | TIMESTAMP) {
        return Ok(Resolved::Str);
    }
    if tag == STR {
        return Ok(Resolved::Str);
    }
    let resolved = resolve_plain(s, tag == TIMESTAMP);
    let resolved_tag = match resolved {
        Resolved::Null => NULL,
        Resolved::Bool(_) => BOOL,
        Resolved::Int(_) | Resolved::Uint(_) => INT,
        Resolved::Float(_) => FLOAT,
        Resolved::Timestamp => TIMESTAMP,
        Resolved::Str => STR,
    };
    if resolved_tag == tag {
        return Ok(resolved);
    }
    match (tag, &resolved) {
        (FLOAT, Resolved::Int(i)) => Ok(Resolved::Float(*i as f64)),
        (FLOAT, Resolved::Uint(u)) => Ok(Resolved::Float(*u as f64)),
        _ => Err(format!(
            "yaml: cannot decode {} `{s}` as a {}",
            short_tag(resolved_tag),
            short_tag(tag)
        )),
    }
}

fn short_tag(tag: &str) -> String {
    match tag.strip_prefix(TAG_PREFIX) {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_string(),
    }
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint(s, 0, 64)`: an optional sign, a base
/// prefix (`0x`, `0o`, `0b`, or a leading `0` for octal) and digits.
fn go_parse_int(s: &str) -> Option<Resolved> {
    let (negative, unsigned) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = unsigned.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    if negative {
        let value = i128::try_from(magnitude).ok().map(|m| -m)?;
        return i64::try_from(value).ok().map(Resolved::Int);
    }
    if let Ok(i) = i64::try_from(magnitude) {
        return Some(Resolved::Int(i));
    }
    // ParseUint takes no sign at all.
    if s.starts_with('+') {
        return None;
    }
    u64::try_from(magnitude).ok().map(Resolved::Uint)
}

/// go-yaml v2's `yamlStyleFloat`: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if b.get(i) == Some(&b'.') {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i);
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat(s, 64)` for decimal text: `None` when it is not a number or
/// overflows (Go's `ErrRange`).
fn go_parse_float(s: &str) -> Option<f64> {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let decimal = !body.is_empty()
        && body
            .bytes()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'));
    if !decimal {
        return None;
    }
    s.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// go-yaml v2's `isBase60Float`: `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`,
/// YAML 1.1 sexagesimals, which it quotes for other parsers' sake.
fn is_base60_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    if !b.get(i).is_some_and(u8::is_ascii_digit) {
        return false;
    }
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
        i += 1;
    }
    let mut groups = 0;
    while b.get(i) == Some(&b':') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() && i - start < 2 {
            i += 1;
        }
        let group = &b[start..i];
        let valid = match group {
            [d] => d.is_ascii_digit(),
            [a, _] => (b'0'..=b'5').contains(a),
            _ => false,
        };
        if !valid {
            return false;
        }
        groups += 1;
    }
    if groups == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'_') {
            i += 1;
        }
    }
    i == b.len()
}

/// go-yaml v2's `parseTimestamp`: `2006-1-2`, `2006-1-2T15:4:5.999999999Z07:00` (or `t`),
/// `2006-1-2 15:4:5.999999999`, as Go's `time.Parse` reads those layouts.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let mut i = 5;
    // Go's getnum for a non-fixed field: one digit, or two.
    let number = |i: &mut usize| -> Option<u32> {
        let first = *b.get(*i).filter(|c| c.is_ascii_digit())?;
        *i += 1;
        let mut n = u32::from(first - b'0');
        if let Some(second) = b.get(*i).filter(|c| c.is_ascii_digit()) {
            n = n * 10 + u32::from(second - b'0');
            *i += 1;
        }
        Some(n)
    };
    let expect = |i: &mut usize, c: u8| -> Option<()> { (b.get(*i) == Some(&c)).then(|| *i += 1) };
    let date = || -> Option<usize> {
        let mut i = i;
        let month = number(&mut i)?;
        expect(&mut i, b'-')?;
        let day = number(&mut i)?;
        let year: u32 = s[..4].parse().ok()?;
        let leap =
            year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
        let days = match month {
            1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
            4 | 6 | 9 | 11 => 30,
            2 if leap => 29,
            2 => 28,
            _ => return None,
        };
        (1..=days).contains(&day).then_some(i)
    };
    let Some(after_date) = date() else {
        return false;
    };
    i = after_date;
    let Some(&separator) = b.get(i) else {
        return true;
    };
    if !matches!(separator, b'T' | b't' | b' ') {
        return false;
    }
    i += 1;
    let time = |i: &mut usize| -> Option<()> {
        let hour = number(i)?;
        expect(i, b':')?;
        let minute = number(i)?;
        expect(i, b':')?;
        let second = number(i)?;
        if hour >= 24 || minute >= 60 || second >= 60 {
            return None;
        }
        if matches!(b.get(*i), Some(b'.' | b',')) && b.get(*i + 1).is_some_and(u8::is_ascii_digit) {
            *i += 1;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
        }
        Some(())
    };
    if time(&mut i).is_none() {
        return false;
    }
    if separator == b' ' {
        return i == b.len();
    }
    match &b[i..] {
        [b'Z'] => true,
        [sign, h1, h2, b':', m1, m2] => {
            matches!(sign, b'+' | b'-') && [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, bits)`: shortest digits, exponent form when the
/// exponent is below -4 or from 6 on (`1e+06`, `1.5e-05`).
fn format_g(f: f64, bits32: bool) -> String {
    let e = if bits32 {
        format!("{:e}", f as f32)
    } else {
        format!("{f:e}")
    };
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = if digits.chars().all(|c| c == '0') {
        "0".to_string()
    } else {
        digits
    };
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{rest}e{exp_sign}{:02}", exp.abs());
    }
    if exp < 0 {
        let zeros = "0".repeat((-exp - 1) as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = exp as usize + 1;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}

// ---- writing -----------------------------------------------------------------------------

/// A JSON value as kube writes YAML (`sigs.k8s.io/yaml.JSONToYAML`): keys in go-yaml's order,
/// strings that would read back as something else double-quoted, multi-line strings as
/// literal blocks, numbers as go-yaml re-reads Go's JSON for them.
pub fn to_string(value: &Value) -> Result<String, String> {
    let mut out = Vec::new();
    {
        let mut emitter = Emitter::new();
        emitter.set_output_string(&mut out);
        emitter.set_unicode(true);
        let mut emit = |event: Event| emitter.emit(event).map_err(|e| e.to_string());
        emit(Event::stream_start(Encoding::Utf8))?;
        emit(Event::document_start(None, &[], true))?;
        emit_value(&mut emit, value)?;
        emit(Event::document_end(true))?;
        emit(Event::stream_end())?;
    }
    String::from_utf8(out).map_err(|e| e.to_string())
}

fn emit_value(
    emit: &mut impl FnMut(Event) -> Result<(), String>,
    value: &Value,
) -> Result<(), String> {
    match value {
        Value::Null => emit(plain("null")),
        Value::Bool(b) => emit(plain(if *b { "true" } else { "false" })),
        Value::Number(n) => emit(plain(&number_text(n))),
        Value::String(s) => emit_string(emit, s),
        Value::Array(items) => {
            emit(Event::sequence_start(
                None,
                None,
                true,
                SequenceStyle::Block,
            ))?;
            for item in items {
                emit_value(emit, item)?;
            }
            emit(Event::sequence_end())
        }
        Value::Object(map) => {
            emit(Event::mapping_start(None, None, true, MappingStyle::Block))?;
            let mut keys: Vec<&String> = map.keys().collect();
            sort_keys(&mut keys);
            for key in keys {
                emit_string(emit, key)?;
                emit_value(emit, &map[key.as_str()])?;
            }
            emit(Event::mapping_end())
        }
    }
}

fn plain(text: &str) -> Event {
    Event::scalar(None, None, text, true, true, ScalarStyle::Plain)
}

/// go-yaml v2's `stringv`: plain when it reads back as this string, a literal block when it
/// spans lines, double-quoted otherwise (the emitter still quotes plain text that YAML's
/// syntax forbids unquoted).
fn emit_string(emit: &mut impl FnMut(Event) -> Result<(), String>, s: &str) -> Result<(), String> {
    let style = if s.contains('\n') {
        ScalarStyle::Literal
    } else if resolve_plain(s, true) == Resolved::Str && !is_base60_float(s) {
        ScalarStyle::Plain
    } else {
        ScalarStyle::DoubleQuoted
    };
    emit(Event::scalar(None, None, s, true, true, style))
}

/// A JSON number as it comes out of kube's YAML: Go's JSON text for it, read by go-yaml
/// (an integer when it is one) and written back (`FormatFloat(f, 'g', -1, 64)`).
fn number_text(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    // Go's encoding/json writes an integral float below 1e21 as plain digits, which
    // go-yaml reads back as an integer when it fits.
    if f.fract() == 0.0 && f.abs() < 1e21 {
        match go_parse_int(&format!("{f:.0}")) {
            Some(Resolved::Int(i)) => return i.to_string(),
            Some(Resolved::Uint(u)) => return u.to_string(),
            _ => {}
        }
    }
    format_g(f, false)
}

/// Sorts map keys by [`key_order`] with a merge sort of its own: go-yaml's order is not a
/// total order for every set of keys (`1` < `01` < `0a` < `1`), which the standard
/// library's sorts may panic on; Go's sort never does.
fn sort_keys(keys: &mut Vec<&String>) {
    if keys.len() <= 1 {
        return;
    }
    let mut right = keys.split_off(keys.len() / 2);
    sort_keys(keys);
    sort_keys(&mut right);
    let left = std::mem::take(keys);
    keys.reserve(left.len() + right.len());
    let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        let take_right = match (l.peek(), r.peek()) {
            (Some(a), Some(b)) => key_order(b, a) == std::cmp::Ordering::Less,
            (None, Some(_)) => true,
            (_, None) => false,
        };
        let next = if take_right { r.next() } else { l.next() };
        match next {
            Some(key) => keys.push(key),
            None => break,
        }
    }
}

/// go-yaml v2's key order (its `keyList.Less` on strings): letters before other runes, runs
/// of digits compared as numbers.
fn key_order(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let less = |x: bool| if x { Ordering::Less } else { Ordering::Greater };
    for i in 0..ar.len().min(br.len()) {
        if ar[i] == br[i] {
            continue;
        }
        let al = ar[i].is_alphabetic();
        let bl = br[i].is_alphabetic();
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            return less(bl);
        }
        let (mut an, mut bn): (i64, i64) = (0, 0);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .wrapping_mul(10)
                .wrapping_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .wrapping_mul(10)
                .wrapping_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return less(an < bn);
        }
        if ai != bi {
            return less(ai < bi);
        }
        return ar[i].cmp(&br[i]);
    }
    ar.len().cmp(&br.len())
}

// ---- reading -----------------------------------------------------------------------------

/// YAML read as kube reads a request body (`sigs.k8s.io/yaml.YAMLToJSON`): the first
/// document only, YAML 1.1 scalars, anchors, aliases and `<<` merges, a repeated key's last
/// value. `duplicates`: go-yaml's strict-mode complaints about repeated keys
/// (`line 4: key "a" already set in map`), which kube reports only when asked to be strict.
pub struct Decoded {
    pub value: Value,
    pub duplicates: Vec<String>,
}

/// go-yaml's strict-mode error, as one message, when any key repeats.
impl Decoded {
    pub fn strict_error(&self) -> Option<String> {
        (!self.duplicates.is_empty()).then(|| {
            format!(
                "yaml: unmarshal errors:\n  {}",
                self.duplicates.join("\n  ")
            )
        })
    }
}

/// kube's `parseYAMLWarnings`: go-yaml's strict error as one warning per complaint.
pub fn strict_warnings(error: &str) -> Vec<String> {
    match error.strip_prefix("yaml: unmarshal errors:\n") {
        Some(rest) => rest.split('\n').map(|l| l.trim().to_string()).collect(),
        None => vec![error.to_string()],
    }
}

/// go-yaml v2 refuses documents nested deeper than this (`exceeded max depth of 10000`).
const MAX_DEPTH: usize = 10_000;

pub fn from_slice(body: &[u8]) -> Result<Decoded, String> {
    let mut input = body;
    let mut parser = Parser::new();
    parser.set_input_string(&mut input);
    let mut reader = Reader {
        copy_budget: (body.len().saturating_mul(8)).max(64 << 20),
        ..Reader::default()
    };
    reader.run(&mut parser)?;
    Ok(Decoded {
        value: reader.result.unwrap_or(Value::Null),
        duplicates: reader.duplicates,
    })
}

/// A finished node: its JSON value, and what it is as a map key.
struct Node {
    value: Value,
    key: Key,
    /// Nodes in it, counted as go-yaml counts them against excessive aliasing when an alias
    /// decodes it again.
    decodes: u64,
    /// About how much memory it takes (text plus a little per node).
    bytes: usize,
    line: u64,
}

/// What each node costs besides its text, in [`Node::bytes`].
const NODE_BYTES: usize = 16;

#[derive(Clone)]
enum Key {
    /// How sigs.k8s.io/yaml turns it into a JSON key, and go-yaml's identity for it (an
    /// integer key 1 and a string key "1" are different keys to go-yaml).
    Text {
        json: String,
        identity: (u8, String),
    },
    Merge,
    Invalid(String),
    /// A mapping or a sequence: no map key (its message is made only if one is used).
    Collection,
}

#[derive(Clone)]
struct Anchored {
    value: Value,
    key: Key,
    decodes: u64,
    bytes: usize,
}

enum Frame {
    Sequence {
        items: Vec<Value>,
        anchor: Option<String>,
        decodes: u64,
        bytes: usize,
        line: u64,
    },
    Mapping {
        map: Map<String, Value>,
        seen: HashSet<(u8, String)>,
        key: Option<Key>,
        anchor: Option<String>,
        decodes: u64,
        bytes: usize,
        line: u64,
    },
}

#[derive(Default)]
struct Reader {
    stack: Vec<Frame>,
    anchors: HashMap<String, Option<Anchored>>,
    result: Option<Value>,
    duplicates: Vec<String>,
    decode_count: u64,
    alias_count: u64,
    /// Memory held in copies (anchored values, alias expansions), and how much may be.
    copied: usize,
    copy_budget: usize,
}

impl Reader {
    fn run<R: std::io::BufRead>(&mut self, parser: &mut Parser<R>) -> Result<(), String> {
        loop {
            let event = parser.parse().map_err(go_parse_error)?;
            let line = event.start_mark.line;
            match event.data {
                EventData::StreamStart { .. } => {}
                EventData::StreamEnd => return Ok(()),
                EventData::DocumentStart { .. } => {}
                EventData::DocumentEnd { .. } => return Ok(()),
                EventData::Alias { anchor } => {
                    let anchored = match self.anchors.get(&anchor) {
                        None => return Err(format!("yaml: unknown anchor '{anchor}' referenced")),
                        Some(None) => {
                            return Err(format!("yaml: anchor '{anchor}' value contains itself"))
                        }
                        Some(Some(anchored)) => (anchored.decodes, anchored.bytes),
                    };
                    // Decoded again, as go-yaml decodes an alias: its nodes count once more;
                    // the copy is counted before it is made.
                    let (decodes, bytes) = anchored;
                    self.alias_count += decodes;
                    self.count(decodes + 1)?;
                    self.copy(bytes)?;
                    let Some(Some(anchored)) = self.anchors.get(&anchor).cloned() else {
                        return Err(format!("yaml: unknown anchor '{anchor}' referenced"));
                    };
                    self.finish(Node {
                        value: anchored.value,
                        key: anchored.key,
                        decodes: anchored.decodes + 1,
                        bytes: anchored.bytes,
                        line,
                    })?;
                }
                EventData::Scalar {
                    anchor,
                    tag,
                    value,
                    plain_implicit,
                    ..
                } => {
                    let (json, key) = scalar(tag.as_deref(), &value, plain_implicit)?;
                    self.count(1)?;
                    let bytes = value.len() + NODE_BYTES;
                    if let Some(anchor) = &anchor {
                        self.copy(bytes)?;
                        self.anchors.insert(
                            anchor.clone(),
                            Some(Anchored {
                                value: json.clone(),
                                key: key.clone(),
                                decodes: 1,
                                bytes,
                            }),
                        );
                    }
                    self.finish(Node {
                        value: json,
                        key,
                        decodes: 1,
                        bytes,
                        line,
                    })?;
                }
                EventData::SequenceStart { anchor, .. } => {
                    self.open(anchor.as_deref())?;
                    self.stack.push(Frame::Sequence {
                        items: Vec::new(),
                        anchor,
                        decodes: 1,
                        bytes: NODE_BYTES,
                        line,
                    });
                }
                EventData::MappingStart { anchor, .. } => {
                    self.open(anchor.as_deref())?;
                    self.stack.push(Frame::Mapping {
                        map: Map::new(),
                        seen: HashSet::new(),
                        key: None,
                        anchor,
                        decodes: 1,
                        bytes: NODE_BYTES,
                        line,
                    });
                }
                EventData::SequenceEnd | EventData::MappingEnd => {
                    let (value, anchor, decodes, bytes, line) = match self.stack.pop() {
                        Some(Frame::Sequence {
                            items,
                            anchor,
                            decodes,
                            bytes,
                            line,
                        }) => (Value::Array(items), anchor, decodes, bytes, line),
                        Some(Frame::Mapping {
                            map,
                            anchor,
                            decodes,
                            bytes,
                            line,
                            ..
                        }) => (Value::Object(map), anchor, decodes, bytes, line),
                        None => return Err("unbalanced YAML events".into()),
                    };
                    if let Some(anchor) = anchor {
                        self.copy(bytes)?;
                        self.anchors.insert(
                            anchor,
                            Some(Anchored {
                                value: value.clone(),
                                key: Key::Collection,
                                decodes,
                                bytes,
                            }),
                        );
                    }
                    self.finish(Node {
                        value,
                        key: Key::Collection,
                        decodes,
                        bytes,
                        line,
                    })?;
                }
            }
        }
    }

    /// A collection starts: its anchor is known (aliases to it from inside are an error)
    /// and it must not nest too deep.
    fn open(&mut self, anchor: Option<&str>) -> Result<(), String> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(format!("yaml: exceeded max depth of {MAX_DEPTH}"));
        }
        self.count(1)?;
        if let Some(anchor) = anchor {
            self.anchors.insert(anchor.to_string(), None);
        }
        Ok(())
    }

    /// Counts nodes decoded as go-yaml counts them (each node once, an alias's anew each
    /// time), refusing a document that is mostly alias expansion.
    fn count(&mut self, decodes: u64) -> Result<(), String> {
        self.decode_count += decodes;
        if self.alias_count > 100
            && self.decode_count > 1000
            && self.alias_count as f64 / self.decode_count as f64
                > allowed_alias_ratio(self.decode_count)
        {
            return Err("yaml: document contains excessive aliasing".into());
        }
        Ok(())
    }

    /// Counts memory a copy takes (an anchored value kept, an alias expanded): copies may
    /// take a few times the document, no more (go-yaml shares anchored nodes instead).
    fn copy(&mut self, bytes: usize) -> Result<(), String> {
        self.copied = self.copied.saturating_add(bytes);
        if self.copied > self.copy_budget {
            return Err("yaml: document contains excessive aliasing".into());
        }
        Ok(())
    }

    /// A node is complete: it goes into the collection being read, or is the document.
    fn finish(&mut self, node: Node) -> Result<(), String> {
        match self.stack.last_mut() {
            None => {
                if self.result.is_none() {
                    self.result = Some(node.value);
                }
                Ok(())
            }
            Some(Frame::Sequence {
                items,
                decodes,
                bytes,
                ..
            }) => {
                *decodes += node.decodes;
                *bytes = bytes.saturating_add(node.bytes);
                items.push(node.value);
                Ok(())
            }
            Some(Frame::Mapping {
                map,
                seen,
                key,
                decodes,
                bytes,
                ..
            }) => {
                *decodes += node.decodes;
                *bytes = bytes.saturating_add(node.bytes);
                match key.take() {
                    None => {
                        match &node.key {
                            Key::Invalid(message) => return Err(message.clone()),
                            Key::Collection => {
                                return Err(format!("yaml: invalid map key: {}", node.value))
                            }
                            _ => {}
                        }
                        *key = Some(node.key);
                        Ok(())
                    }
                    Some(Key::Merge) => merge(map, seen, node, &mut self.duplicates),
                    Some(Key::Text { json, identity }) => {
                        set(map, seen, identity, json, node, &mut self.duplicates);
                        Ok(())
                    }
                    Some(Key::Invalid(message)) => Err(message),
                    Some(Key::Collection) => Err("yaml: invalid map key".into()),
                }
            }
        }
    }
}

/// go-yaml v2's `setMapIndex`: the last value wins; strict mode notes each repeat.
fn set(
    map: &mut Map<String, Value>,
    seen: &mut HashSet<(u8, String)>,
    identity: (u8, String),
    json: String,
    node: Node,
    duplicates: &mut Vec<String>,
) {
    if !seen.insert(identity.clone()) {
        let shown = match identity.0 {
            b's' => Value::String(identity.1).to_string(),
            _ => identity.1,
        };
        duplicates.push(format!(
            "line {}: key {shown} already set in map",
            node.line + 1
        ));
    }
    map.insert(json, node.value);
}

/// A `<<` merge: a mapping's keys (or each of a sequence of mappings', the first taking
/// precedence) set into the mapping being read.
fn merge(
    map: &mut Map<String, Value>,
    seen: &mut HashSet<(u8, String)>,
    node: Node,
    duplicates: &mut Vec<String>,
) -> Result<(), String> {
    const WANT_MAP: &str = "yaml: map merge requires map or sequence of maps as the value";
    let sources = match node.value {
        Value::Object(source) => vec![source],
        Value::Array(items) => {
            let mut sources = Vec::with_capacity(items.len());
            for item in items.into_iter().rev() {
                match item {
                    Value::Object(source) => sources.push(source),
                    _ => return Err(WANT_MAP.into()),
                }
            }
            sources
        }
        _ => return Err(WANT_MAP.into()),
    };
    for source in sources {
        for (json, value) in source {
            let identity = (b's', json.clone());
            let node = Node {
                value,
                key: Key::Invalid(String::new()),
                decodes: 0,
                bytes: 0,
                line: node.line,
            };
            set(map, seen, identity, json, node, duplicates);
        }
    }
    Ok(())
}

/// go-yaml v2's `allowedAliasRatio`: how much of a document may come from alias expansion.
fn allowed_alias_ratio(decodes: u64) -> f64 {
    const LOW: f64 = 400_000.0;
    const HIGH: f64 = 4_000_000.0;
    let decodes = decodes as f64;
    if decodes <= LOW {
        0.99
    } else if decodes >= HIGH {
        0.10
    } else {
        0.99 - 0.89 * ((decodes - LOW) / (HIGH - LOW))
    }
}

/// A scalar event as go-yaml v2 decodes it into `interface{}` and sigs.k8s.io/yaml turns it
/// into JSON, and what it is as a map key.
fn scalar(tag: Option<&str>, text: &str, plain: bool) -> Result<(Value, Key), String> {
    let text_key = |kind: u8, json: String| Key::Text {
        identity: (kind, json.clone()),
        json,
    };
    if tag.is_none() && plain && text == "<<" {
        return Ok((Value::String(text.into()), Key::Merge));
    }
    if tag == Some(MERGE) {
        return Ok((Value::String(text.into()), Key::Merge));
    }
    let resolved = match tag {
        None if !plain => Resolved::Str,
        None => resolve_plain(text, true),
        Some(BINARY) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text.split_ascii_whitespace().collect::<String>())
                .map_err(|_| "yaml: !!binary value contains invalid base64 data".to_string())?;
            let decoded = String::from_utf8_lossy(&bytes).into_owned();
            return Ok((Value::String(decoded.clone()), text_key(b's', decoded)));
        }
        Some(tag) => resolve_tagged(tag, text)?,
    };
    Ok(match resolved {
        Resolved::Null => (
            Value::Null,
            Key::Invalid("unsupported map key of type: <nil>, key: <nil>".into()),
        ),
        Resolved::Bool(b) => (Value::Bool(b), text_key(b'b', b.to_string())),
        Resolved::Int(i) => (Value::from(i), text_key(b'i', i.to_string())),
        Resolved::Uint(u) => (
            // Go's JSON decoder keeps integers that fit an int64; this one is a float.
            Number::from_f64(u as f64).map_or(Value::Null, Value::Number),
            Key::Invalid(format!("unsupported map key of type: uint64, key: 0x{u:x}")),
        ),
        Resolved::Float(f) => {
            if !f.is_finite() {
                let shown = if f.is_nan() {
                    "NaN"
                } else if f > 0.0 {
                    "+Inf"
                } else {
                    "-Inf"
                };
                return Err(format!("json: unsupported value: {shown}"));
            }
            let key = text_key(b'f', format_g(f, true));
            // Go's JSON text for an integral float below 1e21 is its digits, which kube's
            // decoder keeps as an integer when it fits.
            if f.fract() == 0.0 && f.abs() < 1e21 && f.abs() < 9.2e18 {
                (Value::from(f as i64), key)
            } else {
                (Number::from_f64(f).map_or(Value::Null, Value::Number), key)
            }
        }
        Resolved::Timestamp | Resolved::Str => {
            (Value::String(text.into()), text_key(b's', text.into()))
        }
    })
}

/// go-yaml v2's `parser.fail`: `line N: problem`, with the line as it counts it (a scanner's
/// problem one-based, a parser's as the mark has it).
fn go_parse_error(error: libyaml_safer::Error) -> String {
    let problem_line = error.problem_mark().map_or(0, |m| m.line);
    let context_line = error.context_mark().map_or(0, |m| m.line);
    let line = if problem_line != 0 {
        if error.kind() == ErrorKind::Scanner {
            problem_line + 1
        } else {
            problem_line
        }
    } else {
        context_line
    };
    let problem = match error.problem() {
        "" => "unknown problem parsing YAML content",
        problem => problem,
    };
    if line != 0 {
        format!("yaml: line {line}: {problem}")
    } else {
        format!("yaml: {problem}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(value: Value) -> String {
        to_string(&value).expect("emits")
    }

    #[test]
    fn strings_that_yaml_1_1_reads_as_other_things_are_quoted() {
        let out = yaml(json!({
            "bool": "yes", "y": "y", "on": "on", "off": "Off", "null": "~", "empty": "",
            "int": "0755", "underscored": "1_000", "hex": "0x1F", "sexagesimal": "1:20",
            "float": ".5", "date": "2024-01-02", "time": "2024-01-02T10:00:00Z",
            "plain": "plain text", "colon": "a: b", "leading": "- x", "version": "1.33",
            "semver": "v1.2.3", "ip": "10.0.0.1",
        }));
        assert_eq!(
            out,
            "bool: \"yes\"\ncolon: 'a: b'\ndate: \"2024-01-02\"\nempty: \"\"\nfloat: \".5\"\n\
             hex: \"0x1F\"\nint: \"0755\"\nip: 10.0.0.1\nleading: '- x'\n\"null\": \"~\"\n\
             \"off\": \"Off\"\n\"on\": \"on\"\nplain: plain text\nsemver: v1.2.3\n\
             sexagesimal: \"1:20\"\ntime: \"2024-01-02T10:00:00Z\"\nunderscored: \"1_000\"\n\
             version: \"1.33\"\n\"y\": \"y\"\n"
        );
    }

    #[test]
    fn what_it_writes_reads_back_the_same() {
        let value = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {}, "creationTimestamp": "2024-01-02T10:00:00Z"},
            "data": {"a": "yes", "b": "multi\nline\n", "c": "  leading", "d": "tab\there",
                     "e": "ünïcode", "f": "1e3", "g": "null", "h": "#comment", "i": "trailing "},
            "list": [], "nested": [{"k": 1, "v": [true, null, 2.5]}],
            "numbers": [0, -7, 1.5, 1e-7, 1e21, 12345678.5, 18446744073709551615u64],
        });
        let text = yaml(value.clone());
        let back = from_slice(text.as_bytes()).expect("reads back");
        assert!(back.duplicates.is_empty());
        let mut expected = value;
        // Numbers come back as go-yaml reads Go's JSON for them.
        expected["numbers"] = json!([0, -7, 1.5, 1e-7, 1e21, 12345678.5, 18446744073709551615.0]);
        assert_eq!(back.value, expected, "{text}");
    }

    #[test]
    fn layout_is_go_yamls() {
        let out = yaml(json!({
            "kind": "List", "items": [{"b": 1, "a": [1, 2]}, "x"], "empty": {}, "none": [],
            "text": "one\ntwo", "float": 1000000.0, "small": 0.00001, "big": 1234567.5,
        }));
        assert_eq!(
            out,
            "big: 1.2345675e+06\nempty: {}\nfloat: 1000000\nitems:\n- a:\n  - 1\n  - 2\n  b: 1\n\
             - x\nkind: List\nnone: []\nsmall: 1e-05\ntext: |-\n  one\n  two\n"
        );
    }

    #[test]
    fn long_strings_fold_at_80_columns_as_go_yamls_and_read_back_whole() {
        let long = "word ".repeat(30).trim_end().to_string();
        let text = yaml(json!({"description": long}));
        assert!(text.starts_with("description: word word"), "{text}");
        assert!(text.lines().count() > 1, "{text}");
        assert!(text.lines().all(|l| l.len() <= 82), "{text}");
        let back = from_slice(text.as_bytes()).expect("reads back");
        assert_eq!(back.value["description"], long.as_str());
    }

    #[test]
    fn keys_sort_as_go_yaml_sorts_them() {
        let owned: Vec<String> = ["b", "a10", "a9", "A", "1", "10", "2", "_x"]
            .iter()
            .map(|k| k.to_string())
            .collect();
        let mut keys: Vec<&String> = owned.iter().collect();
        sort_keys(&mut keys);
        assert_eq!(keys, ["_x", "1", "2", "10", "A", "a9", "a10", "b"]);
        // go-yaml's order is not total for these; writing them must not fail.
        let mut value = serde_json::Map::new();
        for k in ["1", "01", "0a"]
            .into_iter()
            .map(String::from)
            .chain((0..40).map(|i| format!("k{i}")))
        {
            value.insert(k, json!("v"));
        }
        let text = yaml(Value::Object(value));
        assert!(text.contains("\"01\": v\n"), "{text}");
    }

    #[test]
    fn scalars_read_as_yaml_1_1() {
        let decoded = from_slice(
            b"a: yes\nb: 'yes'\nc: 0755\nd: 1_000\ne: 0x1F\nf: 2024-01-02\ng: 1.0\nh: 1.5\n\
              i: ~\nj: !!str 5\nk: !!int \"7\"\nl: 1:20\nm: On\nnn: -0b101\no: 9223372036854775808\n\
              p: !!float 3\nq: !custom text\nr: !!binary aGk=\n",
        )
        .expect("reads");
        assert_eq!(
            decoded.value,
            json!({"a": true, "b": "yes", "c": 493, "d": 1000, "e": 31, "f": "2024-01-02",
                   "g": 1, "h": 1.5, "i": null, "j": "5", "k": 7, "l": "1:20", "m": true,
                   "nn": -5, "o": 9223372036854775808.0, "p": 3, "q": "text", "r": "hi"})
        );
    }

    #[test]
    fn keys_become_json_keys_as_sigs_yaml_makes_them() {
        let decoded = from_slice(b"1: a\ntrue: b\n1.5: c\n2024-01-02: d\n").expect("reads");
        assert_eq!(
            decoded.value,
            json!({"1": "a", "true": "b", "1.5": "c", "2024-01-02": "d"})
        );
        let error = from_slice(b"~: a\n").err().expect("null key");
        assert!(
            error.starts_with("unsupported map key of type: <nil>"),
            "{error}"
        );
        let error = from_slice(b"[a]: b\n").err().expect("sequence key");
        assert!(error.starts_with("yaml: invalid map key"), "{error}");
    }

    #[test]
    fn anchors_aliases_and_merges() {
        let decoded = from_slice(
            b"base: &b {x: 1, w: 2}\nmore: &m {z: 3}\nd: {<<: *b, w: 9}\n\
              e:\n  <<: [*m, *b]\n  v: 0\nf: *b\n",
        )
        .expect("reads");
        assert_eq!(decoded.value["d"], json!({"x": 1, "w": 9}));
        assert_eq!(decoded.value["e"], json!({"x": 1, "w": 2, "z": 3, "v": 0}));
        assert_eq!(decoded.value["f"], json!({"x": 1, "w": 2}));
        // YAML 1.1: a plain `y` or `n` key is a bool.
        assert_eq!(
            from_slice(b"y: 1\nn: 2\n").expect("reads").value,
            json!({"true": 1, "false": 2})
        );
        assert_eq!(
            from_slice(b"a: *nope\n").err().as_deref(),
            Some("yaml: unknown anchor 'nope' referenced")
        );
        assert_eq!(
            from_slice(b"a: {<<: 1}\n").err().as_deref(),
            Some("yaml: map merge requires map or sequence of maps as the value")
        );
    }

    #[test]
    fn repeated_keys_keep_the_last_value_and_are_strict_errors() {
        let decoded = from_slice(b"a: 1\nb:\n  c: 1\n  c: 2\na: 3\n").expect("reads");
        assert_eq!(decoded.value, json!({"a": 3, "b": {"c": 2}}));
        assert_eq!(
            decoded.strict_error().as_deref(),
            Some(
                "yaml: unmarshal errors:\n  line 4: key \"c\" already set in map\n  line 5: key \"a\" already set in map"
            )
        );
        assert_eq!(
            strict_warnings(&decoded.strict_error().expect("strict")),
            [
                "line 4: key \"c\" already set in map",
                "line 5: key \"a\" already set in map"
            ]
        );
    }

    #[test]
    fn only_the_first_document_is_read() {
        let decoded = from_slice(b"a: 1\n---\nb: 2\n").expect("reads");
        assert_eq!(decoded.value, json!({"a": 1}));
        assert_eq!(from_slice(b"").expect("empty").value, Value::Null);
    }

    #[test]
    fn hostile_documents_fail_cleanly() {
        // An alias bomb: each level doubles the one before.
        let mut bomb = String::from("a0: &a0 [x, x]\n");
        for i in 1..40 {
            bomb.push_str(&format!("a{i}: &a{i} [*a{}, *a{}]\n", i - 1, i - 1));
        }
        assert_eq!(
            from_slice(bomb.as_bytes()).err().as_deref(),
            Some("yaml: document contains excessive aliasing")
        );
        // The same bomb with every alias wrapped in lists, to dilute go-yaml's ratio if
        // collections were counted once per enclosing collection.
        let wrap = |inner: &str| format!("{}{inner}{}", "[".repeat(20), "]".repeat(20));
        let mut wrapped = format!("a0: &a0 {}\n", wrap("[x, x]"));
        for i in 1..30 {
            wrapped.push_str(&format!(
                "a{i}: &a{i} {}\n",
                wrap(&format!("[*a{}, *a{}]", i - 1, i - 1))
            ));
        }
        assert_eq!(
            from_slice(wrapped.as_bytes()).err().as_deref(),
            Some("yaml: document contains excessive aliasing")
        );
        // Anchors on every level of a deep document over a large value: their copies are
        // bounded, not one per level.
        let big = "x".repeat(3 << 20);
        let mut nested = String::new();
        for i in 0..2_000 {
            nested.push_str(&format!("&a{i} ["));
        }
        nested.push_str(&big);
        nested.push_str(&"]".repeat(2_000));
        assert_eq!(
            from_slice(nested.as_bytes()).err().as_deref(),
            Some("yaml: document contains excessive aliasing")
        );
        let deep = "[".repeat(200_000);
        let error = from_slice(deep.as_bytes()).err().expect("too deep");
        assert!(error.contains("exceeded max depth"), "{error}");
        assert_eq!(
            from_slice(b"a: .nan\n").err().as_deref(),
            Some("json: unsupported value: NaN")
        );
        assert_eq!(
            from_slice(b"a: !!int x\n").err().as_deref(),
            Some("yaml: cannot decode !!str `x` as a !!int")
        );
    }

    #[test]
    fn syntax_errors_are_worded_as_go_yaml_words_them() {
        assert_eq!(
            from_slice(b"a: [1\n").err().as_deref(),
            Some("yaml: line 1: did not find expected ',' or ']'")
        );
        assert_eq!(
            from_slice(b"a: b\nc: d: e\n").err().as_deref(),
            Some("yaml: line 2: mapping values are not allowed in this context")
        );
    }
}
