//! Go-style durations (`90s`, `1m30s`, `500ms`, `2h`) as kube-apiserver's flags take them.

use std::time::Duration;

/// Parses a Go duration string. A bare number is seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("empty duration".into());
    }
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(Duration::from_secs(seconds));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("missing unit in duration {text:?}"))?;
        if digits == 0 {
            return Err(format!("invalid duration {text:?}"));
        }
        let number: f64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            unit => return Err(format!("unknown unit {unit:?} in duration {text:?}")),
        };
        total += Duration::from_secs_f64(number * seconds_per_unit);
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Go's `time.ParseDuration`, strictly (no bare numbers but `0`; a sign allowed), in signed
/// seconds, with its errors' words (`time: invalid duration "abc"`, `time: missing unit in
/// duration "5"`, `time: unknown unit "x" in duration "1x"`): what a request's `?timeout=`
/// is read with.
pub fn parse_go_duration(text: &str) -> Result<f64, String> {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let invalid = || format!("time: invalid duration {}", quote(text));
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0.0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total = 0.0_f64;
    while !rest.is_empty() {
        if !rest.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..number_len];
        // At most one point, and a digit on one side of it.
        if number.matches('.').count() > 1 || !number.contains(|c: char| c.is_ascii_digit()) {
            return Err(invalid());
        }
        let value: f64 = if let Some(whole) = number.strip_suffix('.') {
            whole.parse()
        } else if number.starts_with('.') {
            format!("0{number}").parse()
        } else {
            number.parse()
        }
        .map_err(|_| invalid())?;
        rest = &rest[number_len..];
        let unit_len = rest
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", quote(text)));
        }
        let unit = &rest[..unit_len];
        let seconds_per_unit = match unit {
            "ns" => 1e-9,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    quote(unit),
                    quote(text)
                ))
            }
        };
        total += value * seconds_per_unit;
        // Go's int64 nanoseconds hold about 292 years.
        if total > 9.223_372_036_854_776e9 {
            return Err(invalid());
        }
        rest = &rest[unit_len..];
    }
    Ok(if negative { -total } else { total })
}

/// Formats a duration the way Go prints it for whole seconds (`1m30s`, `500ms`).
pub fn format_duration(d: Duration) -> String {
    let millis = d.as_millis();
    if !millis.is_multiple_of(1000) {
        return format!("{millis}ms");
    }
    let mut secs = d.as_secs();
    let mut out = String::new();
    if secs >= 3600 {
        out.push_str(&format!("{}h", secs / 3600));
        secs %= 3600;
    }
    if secs >= 60 {
        out.push_str(&format!("{}m", secs / 60));
        secs %= 60;
    }
    if secs > 0 || out.is_empty() {
        out.push_str(&format!("{secs}s"));
    }
    out
}

/// serde adapter: durations as Go duration strings.
pub mod serde_duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Seconds(u64),
        }
        match Raw::deserialize(d)? {
            Raw::Text(t) => super::parse_duration(&t).map_err(serde::de::Error::custom),
            Raw::Seconds(s) => Ok(Duration::from_secs(s)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_strictly_with_gos_words() {
        assert_eq!(parse_go_duration("1m30s"), Ok(90.0));
        assert_eq!(parse_go_duration("1.5s"), Ok(1.5));
        assert_eq!(parse_go_duration(".5s"), Ok(0.5));
        assert_eq!(parse_go_duration("-2s"), Ok(-2.0));
        assert_eq!(parse_go_duration("0"), Ok(0.0));
        assert_eq!(parse_go_duration("300ms"), Ok(0.3));
        assert_eq!(
            parse_go_duration("abc"),
            Err(r#"time: invalid duration "abc""#.into())
        );
        assert_eq!(
            parse_go_duration("5"),
            Err(r#"time: missing unit in duration "5""#.into())
        );
        assert_eq!(
            parse_go_duration("1x"),
            Err(r#"time: unknown unit "x" in duration "1x""#.into())
        );
        assert_eq!(
            parse_go_duration(".s"),
            Err(r#"time: invalid duration ".s""#.into())
        );
        assert!(parse_go_duration("").is_err());
        assert!(parse_go_duration("1..2s").is_err());
    }

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_duration("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("45").unwrap(), Duration::from_secs(45));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn formats_round_trip() {
        for s in ["1m30s", "500ms", "2h", "0s", "1h1m1s"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }
}
