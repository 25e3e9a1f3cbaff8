//! kube's `resource.Quantity` (`k8s.io/apimachinery/pkg/api/resource`) as far as CEL's
//! quantity library observes it: [`parse`] (`ParseQuantity`, with its error texts), and
//! `Add`, `Sub`, `Cmp`, `Sign`, `AsInt64` and `AsApproximateFloat64`.
//!
//! Like Go, a quantity is either a scaled `int64` (the fast path most strings take) or an
//! arbitrary-precision decimal (Go's `inf.Dec`), and the form shows: `AsInt64`, so CEL's
//! `isInteger()`, is false for the decimal form even when the value is whole
//! (`quantity("1.5Ki")`), and for scaled values with a negative scale (`quantity("1000m")`).
//!
//! One deliberate difference: where Go would build a decimal with thousands of millions of
//! digits (`1e999999999` added to `1`), [`QuantityError::OutOfRange`] is returned instead of
//! exhausting memory.

use std::cmp::Ordering;
use std::fmt;

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};

/// `Nano`, the smallest scale a parsed decimal is rounded (up) to.
const NANO: i64 = -9;
/// `maxInt64Factors`: the most decimal digits the int64 fast path takes.
const MAX_INT64_FACTORS: i64 = 18;
/// The most digits a decimal may be shifted by (see the module documentation).
const MAX_SHIFT_DIGITS: i64 = 4096;
/// `splitREString`, quoted in [`QuantityError::FormatWrong`]'s message.
const SPLIT_RE: &str = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$";

/// Why a string is no quantity (`ErrFormatWrong`, `ErrNumeric`, `ErrSuffix`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityError {
    FormatWrong,
    Numeric,
    Suffix,
    /// Beyond what kubegate computes; see the module documentation.
    OutOfRange,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuantityError::FormatWrong => write!(
                f,
                "quantities must match the regular expression '{SPLIT_RE}'"
            ),
            QuantityError::Numeric => f.write_str("unable to parse numeric part of quantity"),
            QuantityError::Suffix => f.write_str("unable to parse quantity's suffix"),
            QuantityError::OutOfRange => f.write_str("quantity exceeds the supported range"),
        }
    }
}

/// A quantity: `value × 10^scale` (kube's `Scale`; `inf.Dec`'s scale is its negation).
#[derive(Debug, Clone)]
pub enum Quantity {
    /// `int64Amount`.
    Int { value: i64, scale: i32 },
    /// `infDecAmount`.
    Dec { unscaled: BigInt, scale: i32 },
}

impl PartialEq for Quantity {
    /// `Quantity.Equal`: equal values, whatever their form.
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

/// `resource.Format`: only what parsing needs of it.
#[derive(Clone, Copy, PartialEq)]
enum Format {
    DecimalExponent,
    DecimalSI,
    BinarySI,
}

/// The pieces `parseQuantityString` splits a quantity into.
struct Parts<'a> {
    positive: bool,
    value: &'a str,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// `s[start..end]`, which the scanner only takes at ASCII positions.
fn part(s: &str, start: usize, end: usize) -> Result<&str, QuantityError> {
    s.get(start..end).ok_or(QuantityError::FormatWrong)
}

/// `parseQuantityString`: sign, numerator (leading zeros stripped), denominator, and suffix.
fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut positive = true;
    let mut pos = 0;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            value: "0",
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let mut i = pos;
    while i < end && b[i].is_ascii_digit() {
        i += 1;
    }
    if i >= end {
        return Ok(Parts {
            positive,
            value: s,
            num: part(s, pos, end)?,
            denom: "",
            suffix: "",
        });
    }
    let mut num = part(s, pos, i)?;
    pos = i;
    if num.is_empty() {
        num = "0";
    }
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let mut i = pos;
        while i < end && b[i].is_ascii_digit() {
            i += 1;
        }
        if i >= end {
            return Ok(Parts {
                positive,
                value: s,
                num,
                denom: part(s, pos, end)?,
                suffix: "",
            });
        }
        denom = part(s, pos, i)?;
        pos = i;
    }
    let value = part(s, 0, pos)?;
    let suffix_start = pos;
    let whole_suffix = |positive| -> Result<Parts<'_>, QuantityError> {
        Ok(Parts {
            positive,
            value,
            num,
            denom,
            suffix: part(s, suffix_start, end)?,
        })
    };
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos >= end {
        return whole_suffix(positive);
    }
    if matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        return whole_suffix(positive);
    }
    // A character that is neither a suffix letter nor an exponent digit.
    Err(QuantityError::FormatWrong)
}

/// `quantitySuffixer.interpret`: base, exponent and format of a suffix.
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSI));
    let binary = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ if suffix.len() > 1 && suffix.starts_with(['e', 'E']) => {
            let parsed: i64 = suffix[1..].parse().ok()?;
            // Go converts the int64 to int32, wrapping.
            Some((10, parsed as i32, Format::DecimalExponent))
        }
        _ => None,
    }
}

/// `ParseQuantity`.
pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::FormatWrong);
    }
    if s == "0" {
        return Ok(Quantity::Int { value: 0, scale: 0 });
    }
    let parts = split(s)?;
    let (base, exponent, format) = interpret(parts.suffix).ok_or(QuantityError::Suffix)?;
    let digits = (parts.num.len() + parts.denom.len()) as i64;
    let (scale, precision, mantissa) = match format {
        Format::BinarySI if exponent >= 0 && parts.denom.is_empty() => (
            0i32,
            15 - parts.num.len() as i64 - i64::from(exponent) * 3 / 10 - 1,
            1i64 << exponent,
        ),
        Format::BinarySI => (0, -1, 1),
        _ => (exponent, MAX_INT64_FACTORS - digits, 1),
    };
    if precision >= 0 {
        let scale = scale.wrapping_sub(parts.denom.len() as i32);
        if i64::from(scale) >= NANO {
            let shifted = format!("{}{}", parts.num, parts.denom);
            let value: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
            if let Some(result) = value.checked_mul(mantissa) {
                let value = if parts.positive { result } else { -result };
                return Ok(Quantity::Int { value, scale });
            }
        }
    }

    // The arbitrary-precision path.
    let (unscaled, inf_scale) = parse_decimal(parts.value).ok_or(QuantityError::Numeric)?;
    let mut scale = -inf_scale;
    let mut magnitude = unscaled.abs();
    if base == 10 {
        scale += i64::from(exponent);
    } else {
        // Binary suffixes have exponents 10 to 60.
        magnitude <<= exponent as usize;
    }
    if magnitude.is_zero() {
        // Go leaves zero unrounded, its scale wrapped to int32.
        return Ok(Quantity::Dec {
            unscaled: magnitude,
            scale: scale as i32,
        });
    }
    // Rounded up (away from zero) to nano units: any non-zero request gets something.
    let mut magnitude = round_up(magnitude, scale, NANO)?;
    scale = NANO;
    if format == Format::BinarySI
        && compare_decimals(&magnitude, scale, &BigInt::from(i64::MAX), 0) == Ordering::Greater
    {
        magnitude = BigInt::from(i64::MAX);
        scale = 0;
    }
    let unscaled = if unscaled.is_negative() {
        -magnitude
    } else {
        magnitude
    };
    Ok(Quantity::Dec {
        unscaled,
        scale: scale as i32,
    })
}

/// `inf.Dec.SetString`: an optionally signed decimal with at most one `.`; the unscaled
/// value and inf's scale (digits after the point).
fn parse_decimal(text: &str) -> Option<(BigInt, i64)> {
    let mut digits = String::with_capacity(text.len() + 1);
    let mut point: Option<usize> = None;
    let mut count = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '+' | '-' if i == 0 => digits.push(c),
            '.' if point.is_none() => point = Some(count),
            '0'..='9' => {
                digits.push(c);
                count += 1;
            }
            _ => return None,
        }
    }
    if count == 0 {
        return None;
    }
    let unscaled: BigInt = digits.parse().ok()?;
    let inf_scale = point.map_or(0, |p| (count - p) as i64);
    Some((unscaled, inf_scale))
}

/// `magnitude × 10^scale` rounded up to a multiple of `10^target` and expressed at that scale
/// (`inf.Dec.Round(.., RoundUp)` on a non-negative value).
fn round_up(magnitude: BigInt, scale: i64, target: i64) -> Result<BigInt, QuantityError> {
    match scale.cmp(&target) {
        Ordering::Equal => Ok(magnitude),
        Ordering::Greater => Ok(magnitude * pow10(scale - target)?),
        Ordering::Less => {
            let shift = target - scale;
            if shift >= decimal_digits(&magnitude) {
                // 0 < magnitude < 10^shift: one unit once rounded up.
                return Ok(BigInt::from(u8::from(!magnitude.is_zero())));
            }
            let divisor = pow10(shift)?;
            let quotient = &magnitude / &divisor;
            let exact = (&quotient * &divisor) == magnitude;
            Ok(if exact { quotient } else { quotient + 1 })
        }
    }
}

/// `10^n`, refusing shifts that would build absurdly large numbers.
fn pow10(n: i64) -> Result<BigInt, QuantityError> {
    if !(0..=MAX_SHIFT_DIGITS).contains(&n) {
        return Err(QuantityError::OutOfRange);
    }
    Ok(num_traits::pow(BigInt::from(10u8), n as usize))
}

fn decimal_digits(n: &BigInt) -> i64 {
    if n.is_zero() {
        return 1;
    }
    n.magnitude().to_str_radix(10).len() as i64
}

/// Compares `a × 10^sa` with `b × 10^sb` exactly, without aligning numbers whose scales are
/// far apart (their orders of magnitude decide).
fn compare_decimals(a: &BigInt, sa: i64, b: &BigInt, sb: i64) -> Ordering {
    let (sign_a, sign_b) = (a.sign(), b.sign());
    if sign_a != sign_b {
        return sign_a.cmp(&sign_b);
    }
    if a.is_zero() {
        return Ordering::Equal;
    }
    let magnitude = |n: &BigInt, s: i64| decimal_digits(n) + s;
    let (ma, mb) = (magnitude(a, sa), magnitude(b, sb));
    let by_magnitude = if ma != mb {
        ma.cmp(&mb)
    } else {
        // Same order of magnitude: the scales differ by at most the digits' count.
        let scale = sa.min(sb);
        let align = |n: &BigInt, s: i64| {
            n.abs() * num_traits::pow(BigInt::from(10u8), (s - scale) as usize)
        };
        align(a, sa).cmp(&align(b, sb))
    };
    if a.is_negative() {
        by_magnitude.reverse()
    } else {
        by_magnitude
    }
}

/// `positiveScaleInt64`: `base × 10^scale`, or `None` on overflow.
fn positive_scale(base: i64, scale: i64) -> Option<i64> {
    let mut value = base;
    for _ in 0..scale {
        if value == 0 {
            return Some(0);
        }
        value = value.checked_mul(10)?;
    }
    Some(value)
}

/// `int64Amount.Add`: the sum at the smaller scale, or `None` when it overflows.
fn int_add(a: (i64, i32), b: (i64, i32)) -> Option<(i64, i32)> {
    let ((av, a_scale), (bv, b_scale)) = (a, b);
    if bv == 0 {
        return Some(a);
    }
    if av == 0 {
        return Some(b);
    }
    match a_scale.cmp(&b_scale) {
        Ordering::Equal => Some((av.checked_add(bv)?, a_scale)),
        Ordering::Greater => {
            let c = positive_scale(av, i64::from(a_scale) - i64::from(b_scale))?;
            Some((c.checked_add(bv)?, b_scale))
        }
        Ordering::Less => {
            let c = positive_scale(bv, i64::from(b_scale) - i64::from(a_scale))?;
            Some((av.checked_add(c)?, a_scale))
        }
    }
}

impl Quantity {
    /// `NewQuantity(value, DecimalExponent)`.
    pub fn from_int(value: i64) -> Quantity {
        Quantity::Int { value, scale: 0 }
    }

    /// `AsDec`: the unscaled value and scale.
    fn as_decimal(&self) -> (BigInt, i64) {
        match self {
            Quantity::Int { value, scale } => (BigInt::from(*value), i64::from(*scale)),
            Quantity::Dec { unscaled, scale } => (unscaled.clone(), i64::from(*scale)),
        }
    }

    /// `Sign`: -1, 0 or 1.
    pub fn sign(&self) -> i64 {
        match self {
            Quantity::Int { value, .. } => value.signum(),
            Quantity::Dec { unscaled, .. } => match unscaled.sign() {
                num_bigint::Sign::Minus => -1,
                num_bigint::Sign::NoSign => 0,
                num_bigint::Sign::Plus => 1,
            },
        }
    }

    /// `Cmp`: the values compared exactly.
    pub fn cmp(&self, other: &Quantity) -> Ordering {
        if let (
            Quantity::Int {
                value: a,
                scale: sa,
            },
            Quantity::Int {
                value: b,
                scale: sb,
            },
        ) = (self, other)
        {
            let shift = i64::from(*sa) - i64::from(*sb);
            // Within 18 digits of each other both fit an i128 once aligned.
            if shift.abs() <= MAX_INT64_FACTORS {
                let ten = |n: i64| 10i128.pow(n as u32);
                let (a, b) = (i128::from(*a), i128::from(*b));
                return if shift >= 0 {
                    (a * ten(shift)).cmp(&b)
                } else {
                    a.cmp(&(b * ten(-shift)))
                };
            }
        }
        let ((a, sa), (b, sb)) = (self.as_decimal(), other.as_decimal());
        compare_decimals(&a, sa, &b, sb)
    }

    /// `AsInt64`: the value as an int64 when it is a scaled int64 with no fractional scale
    /// that fits (the decimal form never converts).
    pub fn as_int64(&self) -> Option<i64> {
        match self {
            Quantity::Int { value, scale } if *scale >= 0 => {
                positive_scale(*value, i64::from(*scale))
            }
            _ => None,
        }
    }

    /// `AsApproximateFloat64`: the unscaled value times `math.Pow10(scale)`.
    pub fn as_approximate_float64(&self) -> f64 {
        let (base, exponent) = match self {
            Quantity::Int { value, scale } => (*value as f64, *scale),
            Quantity::Dec { unscaled, scale } => (
                unscaled.to_f64().unwrap_or(if unscaled.is_negative() {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }),
                *scale,
            ),
        };
        if exponent == 0 {
            return base;
        }
        base * go_pow10(exponent)
    }

    /// `Add`: the int64 sum when both are scaled int64s and it does not overflow, else the
    /// decimal sum.
    pub fn add(&self, other: &Quantity) -> Result<Quantity, QuantityError> {
        if let (
            Quantity::Int {
                value: a,
                scale: sa,
            },
            Quantity::Int {
                value: b,
                scale: sb,
            },
        ) = (self, other)
        {
            if let Some((value, scale)) = int_add((*a, *sa), (*b, *sb)) {
                return Ok(Quantity::Int { value, scale });
            }
        }
        decimal_sum(self.as_decimal(), other.as_decimal())
    }

    /// `Sub`: as [`Quantity::add`] of the negated operand. Go negates the int64 operand with
    /// wrapping arithmetic, so subtracting `-2^63` adds it; kept as kube does.
    pub fn sub(&self, other: &Quantity) -> Result<Quantity, QuantityError> {
        if let (
            Quantity::Int {
                value: a,
                scale: sa,
            },
            Quantity::Int {
                value: b,
                scale: sb,
            },
        ) = (self, other)
        {
            if let Some((value, scale)) = int_add((*a, *sa), (b.wrapping_neg(), *sb)) {
                return Ok(Quantity::Int { value, scale });
            }
        }
        let (b, sb) = other.as_decimal();
        decimal_sum(self.as_decimal(), (-b, sb))
    }
}

/// `inf.Dec.Add`: the sum at the finer of the two scales.
fn decimal_sum(a: (BigInt, i64), b: (BigInt, i64)) -> Result<Quantity, QuantityError> {
    let scale = a.1.min(b.1);
    let align = |(n, s): (BigInt, i64)| -> Result<BigInt, QuantityError> {
        if n.is_zero() || s == scale {
            return Ok(n);
        }
        Ok(n * pow10(s - scale)?)
    };
    let unscaled = align(a)? + align(b)?;
    let scale = i32::try_from(scale).map_err(|_| QuantityError::OutOfRange)?;
    Ok(Quantity::Dec { unscaled, scale })
}

/// Go's `math.Pow10`, from the same tables, so products round as Go's do.
fn go_pow10(n: i32) -> f64 {
    const TAB: [f64; 32] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    ];
    const POS32: [f64; 10] = [
        1e0, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288,
    ];
    const NEG32: [f64; 11] = [
        1e-0, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320,
    ];
    if (0..=308).contains(&n) {
        let n = n as usize;
        return POS32[n / 32] * TAB[n % 32];
    }
    if (-323..=0).contains(&n) {
        let n = n.unsigned_abs() as usize;
        return NEG32[n / 32] / TAB[n % 32];
    }
    if n > 0 {
        f64::INFINITY
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parsing_takes_kubes_forms_and_refuses_with_its_errors() {
        // (input, Ok((as_int64, approximate float)) or the error)
        type Read = Result<(Option<i64>, f64), QuantityError>;
        let cases: &[(&str, Read)] = &[
            ("0", Ok((Some(0), 0.0))),
            ("12Mi", Ok((Some(12 << 20), 12582912.0))),
            ("1.5G", Ok((Some(1_500_000_000), 1.5e9))),
            ("200k", Ok((Some(200_000), 200_000.0))),
            ("-3", Ok((Some(-3), -3.0))),
            ("+3", Ok((Some(3), 3.0))),
            ("100m", Ok((None, 0.1))),
            ("1000m", Ok((None, 1.0))),
            ("1e3", Ok((Some(1000), 1000.0))),
            ("1E3", Ok((Some(1000), 1000.0))),
            ("1E", Ok((Some(1_000_000_000_000_000_000), 1e18))),
            ("50.703k", Ok((Some(50703), 50703.0))),
            ("1.5Ki", Ok((None, 1536.0))),
            ("1Gi", Ok((Some(1 << 30), 1073741824.0))),
            ("8Ei", Ok((None, 9223372036854775807.0))),
            ("1e-10", Ok((None, 1e-9))),
            ("00.5", Ok((None, 0.5))),
            (".5", Ok((None, 0.5))),
            ("1.", Ok((Some(1), 1.0))),
            // No number, only a suffix: zero, as Go's scanner has it.
            ("Mi", Ok((Some(0), 0.0))),
            ("", Err(QuantityError::FormatWrong)),
            ("Three", Err(QuantityError::FormatWrong)),
            ("1,3G", Err(QuantityError::FormatWrong)),
            ("10Mo", Err(QuantityError::FormatWrong)),
            ("1 ", Err(QuantityError::FormatWrong)),
            ("200K", Err(QuantityError::Suffix)),
            ("10Mm", Err(QuantityError::Suffix)),
            ("1e", Err(QuantityError::Suffix)),
            ("-.e-10", Err(QuantityError::Numeric)),
        ];
        for (input, want) in cases {
            let got = parse(input).map(|v| (v.as_int64(), v.as_approximate_float64()));
            assert_eq!(&got, want, "{input}");
        }
        // Binary suffixes past Ti, and numbers past 18 digits, take the decimal form.
        assert_eq!(q("1Ei").as_int64(), None);
        assert_eq!(q("1Ei").cmp(&Quantity::from_int(1 << 60)), Ordering::Equal);
        let huge = q("9999999999999999999999999999999999999G");
        assert_eq!(huge.as_int64(), None);
        let approx = huge.as_approximate_float64();
        assert!(approx > 9.99e45 && approx < 1.001e46, "{approx}");
        assert_eq!(
            QuantityError::FormatWrong.to_string(),
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            QuantityError::Suffix.to_string(),
            "unable to parse quantity's suffix"
        );
    }

    #[test]
    fn comparison_and_arithmetic_follow_kube() {
        use Ordering::*;
        for (a, b, want) in [
            ("200M", "0.2G", Equal),
            ("50M", "50Mi", Less),
            ("50Mi", "50M", Greater),
            ("1.5Ki", "1536", Equal),
            ("1e30", "1", Greater),
            ("-1e30", "1", Less),
            ("1n", "1e-10", Equal),
            ("2000k", "2M", Equal),
        ] {
            assert_eq!(q(a).cmp(&q(b)), want, "{a} vs {b}");
        }
        assert_eq!(q("50k").add(&q("20")), Ok(q("50.02k")));
        assert_eq!(
            q("50k").add(&Quantity::from_int(20)).map(|v| v.as_int64()),
            Ok(Some(50020))
        );
        assert_eq!(q("50k").sub(&q("20")), Ok(q("49.98k")));
        let chain = q("50k")
            .add(&Quantity::from_int(20))
            .and_then(|v| v.sub(&q("100k")))
            .and_then(|v| v.sub(&Quantity::from_int(-50000)));
        assert_eq!(chain.map(|v| v.as_int64()), Ok(Some(20)));
        // Overflowing the int64 form moves to the decimal one, exactly.
        let big = q("9223372036854775807").add(&q("1")).expect("sum");
        assert!(matches!(big, Quantity::Dec { .. }));
        assert_eq!(big.as_int64(), None);
        assert_eq!(big.cmp(&q("9223372036854775808")), Equal);
        assert_eq!(q("-5").sign(), -1);
        assert_eq!(q("0").sign(), 0);
        assert_eq!(q("1.5Ki").sign(), 1);
        // What Go would take unbounded memory for is refused.
        assert_eq!(
            q("1e999999999").add(&q("1.5Ki")),
            Err(QuantityError::OutOfRange)
        );
    }

    #[test]
    fn pow10_matches_gos_tables() {
        assert_eq!(go_pow10(0), 1.0);
        assert_eq!(go_pow10(3), 1000.0);
        assert_eq!(go_pow10(-9), 1e-9);
        assert_eq!(go_pow10(309), f64::INFINITY);
        assert_eq!(go_pow10(-324), 0.0);
    }
}
