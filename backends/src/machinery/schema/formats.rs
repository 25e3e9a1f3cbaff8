//! The `format`s kube checks in custom resources: apiextensions-apiserver keeps only the
//! formats of its supported list (`pkg/apiserver/validation/formats.go`, the go-openapi
//! `strfmt` registry: `date-time`, `date`, `byte`, `ipv4`, `uuid`, ...; `int32`/`int64` for
//! integers, `float`/`double` for numbers) and drops any other, so an unknown format never
//! fails validation.

use std::net::IpAddr;
use std::sync::OnceLock;

use base64::Engine;

use super::pattern::Pattern;

/// Formats kube 1.33 keeps for strings, by their name without dashes (`date-time` is
/// `datetime`), as go-openapi normalizes them.
const STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// The format kube validates for a schema of these types: `format` itself when kube keeps
/// it, `""` when it strips it (`StripUnsupportedFormatsPostProcessor`).
pub fn effective_format<'a>(types: &[&str], format: &'a str) -> &'a str {
    if format.is_empty() {
        return "";
    }
    let schema_type = if types.len() == 1 { types[0] } else { "" };
    let keep = match schema_type {
        "" | "string" => STRING_FORMATS.contains(&format.replace('-', "").as_str()),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    if keep {
        format
    } else {
        ""
    }
}

/// Whether `text` is valid for a kept string format; `None` for formats that do not apply
/// to strings (`int32`, `double`).
pub fn format_matches(format: &str, text: &str) -> Option<bool> {
    let normalized = format.replace('-', "");
    if !STRING_FORMATS.contains(&normalized.as_str()) {
        return None;
    }
    Some(match normalized.as_str() {
        "password" => true,
        "datetime" => is_date_time(text),
        "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .is_ok(),
        "ipv4" => text.parse::<IpAddr>().is_ok() && text.contains('.'),
        "ipv6" => text.parse::<IpAddr>().is_ok() && text.contains(':'),
        "cidr" => is_cidr(text),
        "mac" => is_mac(text),
        "hostname" => is_hostname(text),
        "email" => is_email(text),
        "uri" => is_uri(text),
        other => regex_for(other).is_some_and(|p| p.is_match(text)),
    })
}

/// go-openapi's `ParseDateTime`: RFC 3339 with or without fractional seconds, and the
/// zone-less forms it also accepts.
/// kube-openapi's `strfmt.IsDateTime`: a full date, `t` (any case), then
/// `hh:mm:ss`, an optional fraction and a zone (`z` or `±hh:mm`); no zone-less or
/// space-separated forms. (As Go's, it looks at the text between the first and second `t`.)
fn is_date_time(text: &str) -> bool {
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    let full_date = chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok() && date.len() == 10;
    full_date && is_rfc3339_time(time)
}

/// kube-openapi's `DateTimePattern` (`^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$`,
/// its `.` any character) and its hour, minute and second bounds.
fn is_rfc3339_time(time: &str) -> bool {
    let b = time.as_bytes();
    let two = |at: usize| {
        b.get(at..at + 2)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    if !(two(0) && b.get(2) == Some(&b':') && two(3) && b.get(5) == Some(&b':') && two(6)) {
        return false;
    }
    if !(time[0..2] <= *"23" && time[3..5] <= *"59" && time[6..8] <= *"59") {
        return false;
    }
    let rest = &time[8..];
    // An optional fraction: any one character, then digits.
    if let Some(first) = rest.chars().next() {
        let after = &rest[first.len_utf8()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && zone_ok(&after[digits..]) {
            return true;
        }
    }
    zone_ok(rest)
}

fn zone_ok(zone: &str) -> bool {
    let b = zone.as_bytes();
    zone == "z"
        || (b.len() == 6
            && matches!(b[0], b'+' | b'-')
            && b[1..3].iter().all(u8::is_ascii_digit)
            && b[3] == b':'
            && b[4..6].iter().all(u8::is_ascii_digit))
}

fn is_cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    bits.parse::<u8>().is_ok_and(|b| b <= max) && !bits.starts_with('+')
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets separated by `:` or `-`, or dotted groups of four
/// hex digits.
fn is_mac(text: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.chars().all(|c| c.is_ascii_hexdigit());
    for sep in [':', '-'] {
        let parts: Vec<&str> = text.split(sep).collect();
        if matches!(parts.len(), 6 | 8 | 20) && parts.iter().all(|p| hex(p, 2)) {
            return true;
        }
    }
    let parts: Vec<&str> = text.split('.').collect();
    matches!(parts.len(), 3 | 4 | 10) && parts.iter().all(|p| hex(p, 4))
}

/// RFC 1123 host names: dot-separated labels of letters, digits and inner dashes, at most
/// 63 characters each and 255 in all.
fn is_hostname(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 255
        && text.trim_end_matches('.').split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Go's `mail.ParseAddress`, simplified: `local@domain`, optionally as `Name <local@domain>`.
fn is_email(text: &str) -> bool {
    let addr = match (text.find('<'), text.strip_suffix('>')) {
        (Some(open), Some(inner)) => &inner[open + 1..],
        _ => text,
    };
    match addr.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !addr.chars().any(char::is_whitespace)
                && !domain.starts_with('.')
        }
        None => false,
    }
}

/// Go's `url.ParseRequestURI`: an absolute URI (`scheme:...`) or an absolute path.
fn is_uri(text: &str) -> bool {
    if text.starts_with('/') {
        return !text.chars().any(char::is_whitespace);
    }
    match text.split_once(':') {
        Some((scheme, rest)) => {
            scheme
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
                && !rest.is_empty()
                && !text.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

/// strfmt's regular expressions for the remaining formats.
fn regex_for(format: &str) -> Option<&'static Pattern> {
    static PATTERNS: OnceLock<Vec<(&'static str, Pattern)>> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            ("bsonobjectid", "^[0-9a-fA-F]{24}$"),
            (
                "uuid",
                "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$",
            ),
            (
                "uuid3",
                "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?3[0-9a-fA-F]{3}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$",
            ),
            (
                "uuid4",
                "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?4[0-9a-fA-F]{3}-?[89abAB][0-9a-fA-F]{3}-?[0-9a-fA-F]{12}$",
            ),
            (
                "uuid5",
                "^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?5[0-9a-fA-F]{3}-?[89abAB][0-9a-fA-F]{3}-?[0-9a-fA-F]{12}$",
            ),
            ("isbn", r"^(?:[0-9]{9}X|[0-9]{10}|[0-9]{13}|[0-9-]{13}|[0-9-]{17})$"),
            ("isbn10", r"^(?:[0-9]{9}X|[0-9]{10}|[0-9-]{13})$"),
            ("isbn13", r"^(?:[0-9]{13}|[0-9-]{17})$"),
            ("creditcard", r"^[0-9 -]{12,23}$"),
            ("ssn", r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"),
            ("hexcolor", "^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"),
            (
                "rgbcolor",
                r"^rgb\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$",
            ),
            (
                "duration",
                r"^(\s*[-+]?[0-9]+(\.[0-9]+)?\s*(ns|us|µs|ms|s|m|h|d|w|ms|mins?|hours?|days?|weeks?|seconds?|minutes?)\s*)+$",
            ),
        ]
        .into_iter()
        .filter_map(|(name, p)| Pattern::new(p).ok().map(|p| (name, p)))
        .collect()
    });
    patterns.iter().find(|(n, _)| *n == format).map(|(_, p)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_formats_follow_kube() {
        assert_eq!(effective_format(&["string"], "date-time"), "date-time");
        assert_eq!(effective_format(&["string"], "unknown-format"), "");
        assert_eq!(effective_format(&["integer"], "int32"), "int32");
        assert_eq!(effective_format(&["integer"], "date"), "");
        assert_eq!(effective_format(&["number"], "double"), "double");
        let cases = [
            ("date-time", "2024-05-01T10:00:00Z", true),
            ("date-time", "2024-05-01T10:00:00.5+02:00", true),
            ("date-time", "yesterday", false),
            // kube-openapi's IsDateTime: a zone is required, `T` (any case) separates.
            ("date-time", "2024-01-01T00:00:00", false),
            ("date-time", "2024-01-01T00:00:00+0200", false),
            ("date-time", "2024-01-01 00:00:00Z", false),
            ("date-time", "2024-01-01t00:00:00z", true),
            ("date-time", "2024-01-01T24:00:00Z", false),
            ("date-time", "2024-01-01T23:59:59.123456789-07:00", true),
            ("date", "2024-05-01", true),
            ("date", "2024-13-01", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "not base64!", false),
            ("ipv4", "10.0.0.1", true),
            ("ipv4", "::1", false),
            ("ipv6", "::1", true),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("mac", "00:1a:2b:3c:4d:5e", true),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "nope", false),
            ("hostname", "a.example.com", true),
            ("hostname", "-bad", false),
            ("email", "a@b.c", true),
            ("email", "ab.c", false),
            ("uri", "https://x/y", true),
            ("uri", "x y", false),
            ("duration", "1h30m", true),
            ("password", "anything", true),
        ];
        for (format, text, want) in cases {
            assert_eq!(format_matches(format, text), Some(want), "{format} {text}");
        }
        assert_eq!(format_matches("int32", "1"), None);
    }
}
