//! The `duration` format as kube's CEL reads a field of it (`strfmt.ParseDuration`): Go's
//! `time.ParseDuration` (`1h30m`, `1.5s`, `-2m`), else Scala-style terms (`3 days`, `2w`),
//! so a rule sees such a field as a CEL duration.

use chrono::Duration;

/// Nanoseconds per unit of Go's `time.ParseDuration`.
const GO_UNITS: &[(&str, i128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// strfmt's units: variants of each, the last of which also matches as a prefix (`days`).
const STRFMT_UNITS: &[(&[&str], i128)] = &[
    (&["ns", "nano"], 1),
    (&["us", "µs", "micro"], 1_000),
    (&["ms", "milli"], 1_000_000),
    (&["s", "sec"], 1_000_000_000),
    (&["m", "min"], 60_000_000_000),
    (&["h", "hr", "hour"], 3_600_000_000_000),
    (&["d", "day"], 86_400_000_000_000),
    (&["w", "wk", "week"], 604_800_000_000_000),
];

/// `strfmt.ParseDuration`; `None` for text neither form reads.
pub fn parse(text: &str) -> Option<Duration> {
    go_duration(text).or_else(|| scala_duration(text))
}

/// Go's `time.ParseDuration`: an optional sign, then numbers (decimal fractions allowed),
/// each with a unit; `0` alone needs none.
pub fn go_duration(text: &str) -> Option<Duration> {
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (whole, after) = rest.split_at(digits);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => {
                let end = after
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(after.len());
                after.split_at(end)
            }
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let unit_end = after
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        let scale = GO_UNITS.iter().find(|(name, _)| *name == unit)?.1;
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut value = whole.checked_mul(scale)?;
        if !fraction.is_empty() {
            let digits = fraction.len().min(30) as u32;
            let numerator: i128 = fraction[..digits as usize].parse().ok()?;
            value =
                value.checked_add(numerator.checked_mul(scale)? / 10i128.checked_pow(digits)?)?;
        }
        total = total.checked_add(value)?;
        rest = after;
    }
    nanos(if negative { -total } else { total })
}

/// strfmt's fallback: every `<digits><spaces><letters>` term, its unit one of
/// [`STRFMT_UNITS`]; at least one term must be understood.
fn scala_duration(text: &str) -> Option<Duration> {
    let bytes = text.as_bytes();
    let (mut i, mut total, mut understood) = (0, 0i128, false);
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let factor: i128 = text[start..i].parse().ok()?;
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        let unit_start = i;
        let unit_end = text[i..]
            .char_indices()
            .find(|(_, c)| !(c.is_ascii_alphabetic() || *c == 'µ'))
            .map_or(text.len(), |(at, _)| i + at);
        if unit_end == unit_start {
            continue;
        }
        i = unit_end;
        let unit = text[unit_start..unit_end].to_lowercase();
        for (variants, scale) in STRFMT_UNITS {
            let last = variants.len() - 1;
            for (k, variant) in variants.iter().enumerate() {
                if (k == last && unit.starts_with(variant)) || unit == *variant {
                    understood = true;
                    total = total.checked_add(factor.checked_mul(*scale)?)?;
                }
            }
        }
    }
    understood.then_some(())?;
    nanos(total)
}

fn nanos(total: i128) -> Option<Duration> {
    Some(Duration::nanoseconds(i64::try_from(total).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_and_strfmt_durations() {
        let ns = |text: &str| parse(text).map(|d| d.num_nanoseconds().unwrap_or(i64::MAX));
        assert_eq!(ns("1h30m"), Some(5_400_000_000_000));
        assert_eq!(ns("1.5s"), Some(1_500_000_000));
        assert_eq!(ns("-2m"), Some(-120_000_000_000));
        assert_eq!(ns("300ms"), Some(300_000_000));
        assert_eq!(ns("0"), Some(0));
        assert_eq!(ns("3 days"), Some(3 * 86_400_000_000_000));
        assert_eq!(ns("2w"), Some(2 * 604_800_000_000_000));
        assert_eq!(ns("1 hour 5 min"), Some(3_900_000_000_000));
        assert_eq!(ns("soon"), None);
        assert_eq!(ns(""), None);
        assert_eq!(go_duration("1x"), None);
        assert_eq!(go_duration("1"), None);
    }
}
