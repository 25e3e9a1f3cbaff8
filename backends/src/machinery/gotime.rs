//! `metav1.Time` and `metav1.MicroTime` as kube-apiserver decodes and encodes them: Go's
//! `time.Parse` with the `RFC3339` or `RFC3339Micro` layout (and its error texts, which kube
//! returns in the 400 for a body it cannot decode), and the UTC form they are written back in
//! (whole seconds for `Time`, microseconds for `MicroTime`; the zero time as `null`).

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use serde_json::Value;

use crate::machinery::json_kind;

/// The layout a time field is parsed and written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `metav1.Time`: `time.RFC3339`, written in whole seconds.
    Rfc3339,
    /// `metav1.MicroTime`: `2006-01-02T15:04:05.000000Z07:00`, exactly six fractional digits.
    Rfc3339Micro,
}

impl Layout {
    fn text(self) -> &'static str {
        match self {
            Layout::Rfc3339 => "2006-01-02T15:04:05Z07:00",
            Layout::Rfc3339Micro => "2006-01-02T15:04:05.000000Z07:00",
        }
    }

    /// The layout of a field of the OpenAPI definition `definition` (`...meta.v1.MicroTime`
    /// or anything else with the `date-time` format).
    pub fn of_definition(definition: Option<&str>) -> Layout {
        match definition {
            Some(name) if name.ends_with(".MicroTime") || name == "MicroTime" => {
                Layout::Rfc3339Micro
            }
            _ => Layout::Rfc3339,
        }
    }
}

/// Go's zero `time.Time` (0001-01-01T00:00:00Z), which `metav1.Time` encodes as `null`.
pub fn is_zero(t: &DateTime<Utc>) -> bool {
    Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0)
        .single()
        .is_some_and(|zero| *t == zero)
}

/// `t` as the field's `MarshalJSON` writes it (UTC).
pub fn format(t: &DateTime<Utc>, layout: Layout) -> String {
    match layout {
        Layout::Rfc3339 => t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Layout::Rfc3339Micro => t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
    }
}

/// `t` as Go's `Time.String` prints a UTC time (`2006-01-02 15:04:05.999999999 -0700 MST`),
/// which is how a field error shows a bad `metav1.Time` value.
pub fn go_string(t: &DateTime<Utc>) -> String {
    let mut text = t.format("%Y-%m-%d %H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos();
    if nanos != 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push_str(" +0000 UTC");
    text
}

/// The field's `UnmarshalJSON`: `null` is the zero time (`None`), a string is parsed with
/// `layout`, anything else fails as `json.Unmarshal` into a string does.
pub fn unmarshal(value: &Value, layout: Layout) -> Result<Option<DateTime<Utc>>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => parse(s, layout).map(Some),
        other => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            json_kind(other)
        )),
    }
}

/// A time field's value after kube decodes and re-encodes it: `null` for no time or the zero
/// time, else the UTC form of [`format`]. The error is Go's, as [`unmarshal`] gives it.
pub fn canonical(value: &Value, layout: Layout) -> Result<Value, String> {
    Ok(match unmarshal(value, layout)? {
        Some(t) if !is_zero(&t) => Value::String(format(&t, layout)),
        _ => Value::Null,
    })
}

/// Whether `text`, which [`parse`] read as `t`, is already what [`canonical`] writes (the usual
/// case, told without formatting anything).
pub fn is_canonical(text: &str, t: &DateTime<Utc>, layout: Layout) -> bool {
    // Parsed, a string of exactly the canonical length ending in `Z` has two-digit hours and
    // (for `MicroTime`) a `.` before its six digits: it is the canonical form.
    let (length, dot) = match layout {
        Layout::Rfc3339 => (20, None),
        Layout::Rfc3339Micro => (27, Some(19)),
    };
    text.len() == length
        && text.ends_with('Z')
        && dot.is_none_or(|at| text.as_bytes().get(at) == Some(&b'.'))
        && !is_zero(t)
}

/// Go's `time` package `quote`: non-ASCII and control bytes as `\xNN`.
fn go_time_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if !c.is_ascii() || c < ' ' {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// Go's `getnum`: one or two leading digits (exactly two when `fixed`).
fn getnum(s: &[u8], fixed: bool) -> Option<(u32, usize)> {
    let digit = |i: usize| {
        s.get(i)
            .filter(|b| b.is_ascii_digit())
            .map(|b| u32::from(b - b'0'))
    };
    let first = digit(0)?;
    match digit(1) {
        Some(second) => Some((first * 10 + second, 2)),
        None if fixed => None,
        None => Some((first, 1)),
    }
}

/// `time.Parse(layout, value)` with Go's error texts (`parsing time "x" as
/// "2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"`, `...: month out of range`).
pub fn parse(value: &str, layout: Layout) -> Result<DateTime<Utc>, String> {
    let q = go_time_quote;
    let cannot = |rest: &[u8], elem: &str| {
        format!(
            "parsing time {} as {}: cannot parse {} as {}",
            q(value),
            q(layout.text()),
            q(&String::from_utf8_lossy(rest)),
            q(elem)
        )
    };
    let out_of_range = |what: &str| format!("parsing time {}: {what} out of range", q(value));
    let bytes = value.as_bytes();
    let mut at = 0usize;
    let literal = |at: &mut usize, lit: u8| -> Result<(), String> {
        if bytes.get(*at) == Some(&lit) {
            *at += 1;
            Ok(())
        } else {
            Err(cannot(&bytes[*at..], &(lit as char).to_string()))
        }
    };
    let number = |at: &mut usize, elem: &str, fixed: bool| -> Result<u32, String> {
        let (n, width) = getnum(&bytes[*at..], fixed).ok_or_else(|| cannot(&bytes[*at..], elem))?;
        *at += width;
        Ok(n)
    };

    if bytes.len() < 4 || !bytes[..4].iter().all(u8::is_ascii_digit) {
        return Err(cannot(bytes, "2006"));
    }
    let year = bytes[..4]
        .iter()
        .fold(0i32, |y, b| y * 10 + i32::from(b - b'0'));
    at += 4;
    literal(&mut at, b'-')?;
    let month = number(&mut at, "01", true)?;
    if !(1..=12).contains(&month) {
        return Err(out_of_range("month"));
    }
    literal(&mut at, b'-')?;
    let day = number(&mut at, "02", true)?;
    literal(&mut at, b'T')?;
    let hour = number(&mut at, "15", false)?;
    if hour >= 24 {
        return Err(out_of_range("hour"));
    }
    literal(&mut at, b':')?;
    let minute = number(&mut at, "04", true)?;
    if minute >= 60 {
        return Err(out_of_range("minute"));
    }
    literal(&mut at, b':')?;
    let second = number(&mut at, "05", true)?;
    if second >= 60 {
        return Err(out_of_range("second"));
    }
    let fraction_digits = |from: usize| {
        bytes[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    // Up to nine digits of a fraction, as nanoseconds.
    let nanos_of = |digits: &[u8]| {
        (0..9).fold(0u32, |n, i| {
            n * 10 + digits.get(i).map_or(0, |b| u32::from(b - b'0'))
        })
    };
    let mut nanos = 0u32;
    match layout {
        Layout::Rfc3339 => {
            // A fraction the layout does not name is still read (up to nanoseconds).
            if matches!(bytes.get(at), Some(b'.' | b','))
                && bytes.get(at + 1).is_some_and(u8::is_ascii_digit)
            {
                let digits = fraction_digits(at + 1);
                nanos = nanos_of(&bytes[at + 1..at + 1 + digits]);
                at += 1 + digits;
            }
        }
        Layout::Rfc3339Micro => {
            // Exactly a separator and six digits; more digits are left for the zone to refuse.
            let rest = &bytes[at..];
            let six = rest.get(1..7).filter(|d| d.iter().all(u8::is_ascii_digit));
            match (rest.first(), six) {
                (Some(b'.' | b','), Some(digits)) => {
                    nanos = nanos_of(digits);
                    at += 7;
                }
                _ => return Err(cannot(rest, ".000000")),
            }
        }
    }
    let zone_start = at;
    let offset_seconds: i64 = if bytes.get(at) == Some(&b'Z') {
        at += 1;
        0
    } else {
        let rest = &bytes[zone_start..];
        let bad = || cannot(rest, "Z07:00");
        if rest.len() < 6 || rest[3] != b':' {
            return Err(bad());
        }
        let hh = getnum(&rest[1..3], true).map(|(n, _)| n);
        let mm = hh.and_then(|_| getnum(&rest[4..6], true).map(|(n, _)| n));
        let (h, m) = (hh.unwrap_or(0), mm.unwrap_or(0));
        if h > 24 {
            return Err(out_of_range("time zone offset hour"));
        }
        if m > 60 {
            return Err(out_of_range("time zone offset minute"));
        }
        let sign = match rest[0] {
            b'+' => 1,
            b'-' => -1,
            _ => return Err(bad()),
        };
        if mm.is_none() {
            return Err(bad());
        }
        at += 6;
        sign * i64::from(h * 3600 + m * 60)
    };
    if at < bytes.len() {
        return Err(format!(
            "parsing time {}: extra text: {}",
            q(value),
            q(&String::from_utf8_lossy(&bytes[at..]))
        ));
    }
    let date = NaiveDate::from_ymd_opt(year, month, day)
        .ok_or_else(|| format!("parsing time {}: day out of range", q(value)))?;
    let local = date
        .and_hms_nano_opt(hour, minute, second, nanos)
        .ok_or_else(|| out_of_range("second"))?;
    Ok(Utc.from_utc_datetime(&local) - chrono::Duration::seconds(offset_seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_are_read_as_go_reads_them_and_written_in_utc() {
        let cases = [
            (
                Layout::Rfc3339,
                "2024-05-01T12:00:00Z",
                "2024-05-01T12:00:00Z",
            ),
            // A fraction RFC3339 does not name is read, and dropped on the way out.
            (
                Layout::Rfc3339,
                "2024-05-01T12:00:00.5+02:00",
                "2024-05-01T10:00:00Z",
            ),
            (
                Layout::Rfc3339,
                "2024-05-01T9:00:00-01:30",
                "2024-05-01T10:30:00Z",
            ),
            (
                Layout::Rfc3339Micro,
                "2026-11-29T01:00:00.000000Z",
                "2026-11-29T01:00:00.000000Z",
            ),
            (
                Layout::Rfc3339Micro,
                "2026-11-29T02:00:00.500000+01:00",
                "2026-11-29T01:00:00.500000Z",
            ),
            (
                Layout::Rfc3339Micro,
                "2026-11-29T01:00:00,123456Z",
                "2026-11-29T01:00:00.123456Z",
            ),
        ];
        for (layout, input, written) in cases {
            assert_eq!(
                canonical(&json!(input), layout),
                Ok(json!(written)),
                "{input}"
            );
        }
        assert_eq!(
            canonical(&json!("0001-01-01T00:00:00Z"), Layout::Rfc3339),
            Ok(Value::Null)
        );
        assert_eq!(
            canonical(&Value::Null, Layout::Rfc3339Micro),
            Ok(Value::Null)
        );
    }

    #[test]
    fn bad_times_fail_with_gos_words() {
        let micro = "2006-01-02T15:04:05.000000Z07:00";
        let cases = [
            (
                Layout::Rfc3339Micro,
                json!("2026-11-29T01:00:00Z"),
                format!(
                    r#"parsing time "2026-11-29T01:00:00Z" as "{micro}": cannot parse "Z" as ".000000""#
                ),
            ),
            (
                Layout::Rfc3339Micro,
                json!("2026-11-29T01:00:00.123456789Z"),
                format!(
                    r#"parsing time "2026-11-29T01:00:00.123456789Z" as "{micro}": cannot parse "789Z" as "Z07:00""#
                ),
            ),
            (
                Layout::Rfc3339Micro,
                json!("garbage"),
                format!(r#"parsing time "garbage" as "{micro}": cannot parse "garbage" as "2006""#),
            ),
            (
                Layout::Rfc3339,
                json!("yesterday"),
                r#"parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": cannot parse "yesterday" as "2006""#
                    .to_string(),
            ),
            (
                Layout::Rfc3339,
                json!("2026-13-01T00:00:00Z"),
                r#"parsing time "2026-13-01T00:00:00Z": month out of range"#.to_string(),
            ),
            (
                Layout::Rfc3339,
                json!("2026-02-30T00:00:00Z"),
                r#"parsing time "2026-02-30T00:00:00Z": day out of range"#.to_string(),
            ),
            (
                Layout::Rfc3339,
                json!("2026-02-03T00:00:00Zjunk"),
                r#"parsing time "2026-02-03T00:00:00Zjunk": extra text: "junk""#.to_string(),
            ),
            (
                Layout::Rfc3339,
                json!(5),
                "json: cannot unmarshal number into Go value of type string".to_string(),
            ),
        ];
        for (layout, input, error) in cases {
            assert_eq!(canonical(&input, layout), Err(error), "{input}");
        }
    }

    #[test]
    fn the_canonical_form_is_recognised_without_formatting() {
        for (layout, text) in [
            (Layout::Rfc3339, "2024-05-01T12:00:00Z"),
            (Layout::Rfc3339, "2024-05-01T12:00:00+00:00"),
            (Layout::Rfc3339, "2024-05-01T12:00:00.5Z"),
            (Layout::Rfc3339, "2024-05-01T9:00:00Z"),
            (Layout::Rfc3339, "0001-01-01T00:00:00Z"),
            (Layout::Rfc3339Micro, "2026-11-29T01:00:00.000000Z"),
            (Layout::Rfc3339Micro, "2026-11-29T01:00:00,000000Z"),
            (Layout::Rfc3339Micro, "2026-11-29T01:00:00.000000+00:00"),
        ] {
            let t = parse(text, layout).expect(text);
            let written = canonical(&json!(text), layout).expect(text);
            assert_eq!(
                is_canonical(text, &t, layout),
                written == json!(text),
                "{text}"
            );
        }
    }

    #[test]
    fn the_layout_follows_the_definition() {
        assert_eq!(
            Layout::of_definition(Some("io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime")),
            Layout::Rfc3339Micro
        );
        assert_eq!(
            Layout::of_definition(Some("io.k8s.apimachinery.pkg.apis.meta.v1.Time")),
            Layout::Rfc3339
        );
        assert_eq!(Layout::of_definition(None), Layout::Rfc3339);
    }
}
