//! Go's `%q` (`strconv.Quote`) for the names, rules and values kube puts in its messages
//! (RBAC reasons, field errors, selector and patch errors), so that they read byte for byte
//! as kube-apiserver's.

use std::fmt::Write;

/// Go's `strconv.Quote(s)`: double quotes around `s`, with `"` and `\` escaped and anything
/// Go's `unicode.IsPrint` rejects written as an escape.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    push_go_quoted(&mut out, s);
    out
}

/// Go's `%q` of a `[]string`: `["a" "b"]`.
pub fn go_quote_list(values: &[String]) -> String {
    let mut out = String::with_capacity(values.iter().map(|v| v.len() + 3).sum::<usize>() + 2);
    out.push('[');
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        push_go_quoted(&mut out, value);
    }
    out.push(']');
    out
}

/// Appends `strconv.Quote(s)` to `out`.
pub fn push_go_quoted(out: &mut String, s: &str) {
    out.push('"');
    // The common case (printable ASCII, nothing to escape) is one copy.
    if s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push_str(s);
        out.push('"');
        return;
    }
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if !is_go_print(c) => {
                if (c as u32) < 0x10000 {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                } else {
                    let _ = write!(out, "\\U{:08x}", c as u32);
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// An approximation of Go's `unicode.IsPrint` without Unicode tables: control characters,
/// spaces other than U+0020, the common format characters (soft hyphen, zero-width and
/// bidirectional marks, BOM, tags) and the private-use areas are unprintable. Unassigned code
/// points, which Go also escapes, are taken as printable; RBAC names are DNS names in
/// practice, so the difference does not show.
fn is_go_print(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    let u = c as u32;
    !matches!(
        u,
        0xad
            | 0x600..=0x605
            | 0x61c
            | 0x6dd
            | 0x70f
            | 0x180e
            | 0x200b..=0x200f
            | 0x202a..=0x202e
            | 0x2060..=0x2064
            | 0x2066..=0x206f
            | 0xe000..=0xf8ff
            | 0xfeff
            | 0xfff9..=0xfffb
            | 0xe0001
            | 0xe0020..=0xe007f
            | 0xf0000..=0x10ffff
    )
}
