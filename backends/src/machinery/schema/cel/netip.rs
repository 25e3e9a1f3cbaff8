//! Go's `net/netip` (as of Go 1.23, which kube 1.32 is built with), as far as kube's IP and
//! CIDR libraries observe it: `ParseAddr` and `ParsePrefix` with their error texts, the
//! canonical `String` forms, the address classes (`IsLoopback`, ...) and `Contains`,
//! `Overlaps`, `Masked`.

use std::fmt;

/// `netip.Addr`: IPv4, or IPv6 (an IPv4-mapped IPv6 address stays IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Addr {
    V4([u8; 4]),
    V6([u8; 16]),
}

/// A parsed address and its IPv6 zone (`fe80::1%eth0`), empty when there is none.
pub struct Parsed<'a> {
    pub addr: Addr,
    pub zone: &'a str,
}

/// `parseAddrError.Error()`.
fn addr_error(input: &str, msg: &str, at: &str) -> String {
    let mut out = format!("ParseAddr({}): {msg}", go_quote(input));
    if !at.is_empty() {
        out.push_str(&format!(" (at {})", go_quote(at)));
    }
    out
}

/// Go's `strconv.Quote` (printable ASCII as is, the rest escaped).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `ParseAddr`.
pub fn parse_addr(s: &str) -> Result<Parsed<'_>, String> {
    for b in s.bytes() {
        match b {
            b'.' => {
                return parse_ipv4(s).map(|a| Parsed {
                    addr: Addr::V4(a),
                    zone: "",
                })
            }
            b':' => return parse_ipv6(s),
            b'%' => return Err(addr_error(s, "missing IPv6 address", "")),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", ""))
}

fn parse_ipv4(s: &str) -> Result<[u8; 4], String> {
    let mut fields = [0u8; 4];
    parse_ipv4_fields(s, 0, s.len(), &mut fields)?;
    Ok(fields)
}

/// `parseIPv4Fields`: the dotted quad `in[off..end]`; errors name all of `in`.
fn parse_ipv4_fields(
    input: &str,
    off: usize,
    end: usize,
    fields: &mut [u8; 4],
) -> Result<(), String> {
    let s = &input.as_bytes()[off..end];
    let rest = |i: usize| input.get(off + i..end).unwrap_or("");
    let (mut val, mut pos, mut dig_len) = (0u32, 0usize, 0usize);
    for (i, &c) in s.iter().enumerate() {
        if c.is_ascii_digit() {
            if dig_len == 1 && val == 0 {
                return Err(addr_error(
                    input,
                    "IPv4 field has octet with leading zero",
                    "",
                ));
            }
            val = val * 10 + u32::from(c - b'0');
            dig_len += 1;
            if val > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", ""));
            }
        } else if c == b'.' {
            if i == 0 || i == s.len() - 1 || s[i - 1] == b'.' {
                return Err(addr_error(
                    input,
                    "IPv4 field must have at least one digit",
                    rest(i),
                ));
            }
            if pos == 3 {
                return Err(addr_error(input, "IPv4 address too long", ""));
            }
            fields[pos] = val as u8;
            pos += 1;
            val = 0;
            dig_len = 0;
        } else {
            return Err(addr_error(input, "unexpected character", rest(i)));
        }
    }
    if pos < 3 {
        return Err(addr_error(input, "IPv4 address too short", ""));
    }
    fields[3] = val as u8;
    Ok(())
}

fn parse_ipv6(input: &str) -> Result<Parsed<'_>, String> {
    let (mut s, zone) = match input.find('%') {
        Some(i) => {
            let zone = &input[i + 1..];
            if zone.is_empty() {
                return Err(addr_error(input, "zone must be a non-empty string", ""));
            }
            (&input[..i], zone)
        }
        None => (input, ""),
    };
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.starts_with("::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok(Parsed {
                addr: Addr::V6(ip),
                zone,
            });
        }
    }
    let mut i = 0usize;
    while i < 16 {
        let b = s.as_bytes();
        let mut off = 0;
        let mut acc: u32 = 0;
        while off < b.len() {
            let digit = match b[off] {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            acc = (acc << 4) + u32::from(digit);
            if acc > 0xffff {
                return Err(addr_error(input, "IPv6 field has value >=2^16", s));
            }
            off += 1;
        }
        if off == 0 {
            return Err(addr_error(
                input,
                "each colon-separated field must have at least one digit",
                s,
            ));
        }
        if off < b.len() && b[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                return Err(addr_error(
                    input,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    s,
                ));
            }
            if i + 4 > 16 {
                return Err(addr_error(
                    input,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    s,
                ));
            }
            let end = if zone.is_empty() {
                input.len()
            } else {
                input.len() - zone.len() - 1
            };
            let mut fields = [0u8; 4];
            parse_ipv4_fields(input, end - s.len(), end, &mut fields)?;
            ip[i..i + 4].copy_from_slice(&fields);
            s = "";
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(addr_error(input, "unexpected character, want colon", s));
        } else if s.len() == 1 {
            return Err(addr_error(
                input,
                "colon must be followed by more characters",
                s,
            ));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", s));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", s));
    }
    if i < 16 {
        let Some(ellipsis) = ellipsis else {
            return Err(addr_error(input, "address string too short", ""));
        };
        let n = 16 - i;
        ip.copy_within(ellipsis..i, ellipsis + n);
        ip[ellipsis..ellipsis + n].fill(0);
    } else if ellipsis.is_some() {
        return Err(addr_error(
            input,
            "the :: must expand to at least one field of zeros",
            "",
        ));
    }
    Ok(Parsed {
        addr: Addr::V6(ip),
        zone,
    })
}

impl Addr {
    fn bits(self) -> u128 {
        match self {
            Addr::V4(a) => u128::from(u32::from_be_bytes(a)) | 0xffff_0000_0000,
            Addr::V6(a) => u128::from_be_bytes(a),
        }
    }

    /// `BitLen`: 32 or 128.
    pub fn bit_len(self) -> u8 {
        match self {
            Addr::V4(_) => 32,
            Addr::V6(_) => 128,
        }
    }

    /// `Is4In6`: `::ffff:a.b.c.d`.
    pub fn is_4in6(self) -> bool {
        matches!(self, Addr::V6(_)) && self.bits() >> 32 == 0xffff
    }

    /// The address with an IPv4-mapped IPv6 address unmapped (`Unmap`).
    fn unmapped(self) -> Addr {
        match self {
            Addr::V6(a) if self.is_4in6() => Addr::V4([a[12], a[13], a[14], a[15]]),
            other => other,
        }
    }

    fn first_word(self) -> u16 {
        match self {
            Addr::V4(_) => 0,
            Addr::V6(a) => u16::from_be_bytes([a[0], a[1]]),
        }
    }

    pub fn is_unspecified(self) -> bool {
        matches!(self, Addr::V4([0, 0, 0, 0])) || self == Addr::V6([0; 16])
    }

    pub fn is_loopback(self) -> bool {
        match self.unmapped() {
            Addr::V4(a) => a[0] == 127,
            v6 => v6.bits() == 1,
        }
    }

    fn is_multicast(self) -> bool {
        match self.unmapped() {
            Addr::V4(a) => a[0] & 0xf0 == 0xe0,
            Addr::V6(a) => a[0] == 0xff,
        }
    }

    pub fn is_link_local_unicast(self) -> bool {
        match self.unmapped() {
            Addr::V4(a) => a[0] == 169 && a[1] == 254,
            v6 => v6.first_word() & 0xffc0 == 0xfe80,
        }
    }

    pub fn is_link_local_multicast(self) -> bool {
        match self.unmapped() {
            Addr::V4(a) => a[0] == 224 && a[1] == 0 && a[2] == 0,
            v6 => v6.first_word() & 0xff0f == 0xff02,
        }
    }

    /// `IsGlobalUnicast`, as Go has it: private and unique-local addresses count.
    pub fn is_global_unicast(self) -> bool {
        let ip = self.unmapped();
        if matches!(ip, Addr::V4([0, 0, 0, 0]) | Addr::V4([255, 255, 255, 255])) {
            return false;
        }
        ip != Addr::V6([0; 16])
            && !ip.is_loopback()
            && !ip.is_multicast()
            && !ip.is_link_local_unicast()
    }

    /// The address with all but its first `bits` bits cleared.
    fn masked(self, bits: u8) -> Addr {
        match self {
            Addr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
                Addr::V4((u32::from_be_bytes(a) & mask).to_be_bytes())
            }
            Addr::V6(a) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
                Addr::V6((u128::from_be_bytes(a) & mask).to_be_bytes())
            }
        }
    }
}

/// `Addr.String`: dotted quad, or RFC 5952 IPv6 (`::ffff:1.2.3.4` for mapped addresses).
impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Addr::V4(a) => write!(f, "{}.{}.{}.{}", a[0], a[1], a[2], a[3]),
            Addr::V6(a) if self.is_4in6() => {
                write!(f, "::ffff:{}.{}.{}.{}", a[12], a[13], a[14], a[15])
            }
            Addr::V6(a) => {
                let word = |i: usize| u16::from_be_bytes([a[2 * i], a[2 * i + 1]]);
                // The longest run of two or more zero words (the first of equals) becomes `::`.
                let (mut zero_start, mut zero_end) = (8usize, 8usize);
                let mut i = 0;
                while i < 8 {
                    let mut j = i;
                    while j < 8 && word(j) == 0 {
                        j += 1;
                    }
                    if j - i >= 2 && (zero_start == 8 || j - i > zero_end - zero_start) {
                        (zero_start, zero_end) = (i, j);
                    }
                    i = j.max(i + 1);
                }
                let mut i = 0;
                while i < 8 {
                    if i == zero_start {
                        f.write_str("::")?;
                        i = zero_end;
                        if i >= 8 {
                            break;
                        }
                    } else if i > 0 {
                        f.write_str(":")?;
                    }
                    write!(f, "{:x}", word(i))?;
                    i += 1;
                }
                Ok(())
            }
        }
    }
}

/// `netip.Prefix`: an address (not masked) and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: Addr,
    pub bits: u8,
}

/// `ParsePrefix`.
pub fn parse_prefix(s: &str) -> Result<Prefix, String> {
    let error = |msg: &str| format!("netip.ParsePrefix({}): {msg}", go_quote(s));
    let Some(slash) = s.rfind('/') else {
        return Err(error("no '/'"));
    };
    let parsed = parse_addr(&s[..slash]).map_err(|e| error(&e))?;
    if !parsed.zone.is_empty() {
        return Err(error("IPv6 zones cannot be present in a prefix"));
    }
    let bits_text = &s[slash + 1..];
    let bad_bits = || error(&format!("bad bits after slash: {}", go_quote(bits_text)));
    // Go refuses a sign or leading zeros, which `Atoi` would take.
    if bits_text.len() > 1 && !matches!(bits_text.as_bytes()[0], b'1'..=b'9') {
        return Err(bad_bits());
    }
    let bits: i64 = bits_text.parse().map_err(|_| bad_bits())?;
    if bits < 0 || bits > i64::from(parsed.addr.bit_len()) {
        return Err(error("prefix length out of range"));
    }
    Ok(Prefix {
        addr: parsed.addr,
        bits: bits as u8,
    })
}

impl Prefix {
    /// `Masked`: the prefix with the address's host bits cleared.
    pub fn masked(self) -> Prefix {
        Prefix {
            addr: self.addr.masked(self.bits),
            bits: self.bits,
        }
    }

    /// `Contains`: same family, and the first `bits` bits agree.
    pub fn contains(self, ip: Addr) -> bool {
        self.addr.bit_len() == ip.bit_len() && ip.masked(self.bits) == self.addr.masked(self.bits)
    }

    /// `Overlaps`: same family and the shorter prefix's bits agree.
    pub fn overlaps(self, other: Prefix) -> bool {
        if self == other {
            return true;
        }
        if self.addr.bit_len() != other.addr.bit_len() {
            return false;
        }
        let bits = self.bits.min(other.bits);
        bits == 0 || self.addr.masked(bits) == other.addr.masked(bits)
    }
}

/// `Prefix.String`: `<ip>/<bits>`.
impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_and_print_as_go_does() {
        for (input, want) in [
            ("192.168.0.1", Ok("192.168.0.1")),
            ("2001:db8::68", Ok("2001:db8::68")),
            ("2001:0db8:0:0:0:0:0:0068", Ok("2001:db8::68")),
            ("::", Ok("::")),
            ("::1", Ok("::1")),
            ("1::", Ok("1::")),
            ("1:0:0:2:0:0:0:3", Ok("1:0:0:2::3")),
            ("1:0:0:2:0:0:3:4", Ok("1::2:0:0:3:4")),
            ("1:0:2:3:4:5:6:7", Ok("1:0:2:3:4:5:6:7")),
            ("::ffff:1.2.3.4", Ok("::ffff:1.2.3.4")),
            ("::1.2.3.4", Ok("::102:304")),
            ("fe80::1%eth0", Ok("fe80::1")),
            ("", Err(r#"ParseAddr(""): unable to parse IP"#)),
            ("foo", Err(r#"ParseAddr("foo"): unable to parse IP"#)),
            ("%eth0", Err(r#"ParseAddr("%eth0"): missing IPv6 address"#)),
            (
                "1.2.3",
                Err(r#"ParseAddr("1.2.3"): IPv4 address too short"#),
            ),
            (
                "1.2.3.4.5",
                Err(r#"ParseAddr("1.2.3.4.5"): IPv4 address too long"#),
            ),
            (
                "01.2.3.4",
                Err(r#"ParseAddr("01.2.3.4"): IPv4 field has octet with leading zero"#),
            ),
            (
                "256.2.3.4",
                Err(r#"ParseAddr("256.2.3.4"): IPv4 field has value >255"#),
            ),
            (
                "1..3.4",
                Err(r#"ParseAddr("1..3.4"): IPv4 field must have at least one digit (at ".3.4")"#),
            ),
            (
                "1.2.3.a",
                Err(r#"ParseAddr("1.2.3.a"): unexpected character (at "a")"#),
            ),
            (
                "fe80::1%",
                Err(r#"ParseAddr("fe80::1%"): zone must be a non-empty string"#),
            ),
            ("1:2", Err(r#"ParseAddr("1:2"): address string too short"#)),
            (
                "1::2::3",
                Err(r#"ParseAddr("1::2::3"): multiple :: in address (at ":3")"#),
            ),
            (
                "12345::",
                Err(r#"ParseAddr("12345::"): IPv6 field has value >=2^16 (at "12345::")"#),
            ),
            (
                "::ffff:1.2.3.400",
                Err(r#"ParseAddr("::ffff:1.2.3.400"): IPv4 field has value >255"#),
            ),
            (
                "1:2:3:4:5:6:7:8:9",
                Err(r#"ParseAddr("1:2:3:4:5:6:7:8:9"): trailing garbage after address (at "9")"#),
            ),
            (
                "1:2:3:4::5:6:7:8",
                Err(
                    r#"ParseAddr("1:2:3:4::5:6:7:8"): the :: must expand to at least one field of zeros"#,
                ),
            ),
        ] {
            let got = parse_addr(input).map(|p| p.addr.to_string());
            assert_eq!(got.as_deref().map_err(String::as_str), want, "{input}");
        }
    }

    #[test]
    fn address_classes_follow_go() {
        let addr = |s: &str| parse_addr(s).map(|p| p.addr).expect(s);
        assert!(addr("0.0.0.0").is_unspecified() && addr("::").is_unspecified());
        assert!(!addr("::1").is_unspecified());
        assert!(addr("127.0.0.2").is_loopback() && addr("::1").is_loopback());
        assert!(
            addr("169.254.1.1").is_link_local_unicast() && addr("fe80::1").is_link_local_unicast()
        );
        assert!(
            addr("224.0.0.1").is_link_local_multicast()
                && addr("ff02::1").is_link_local_multicast()
        );
        assert!(!addr("224.0.1.1").is_link_local_multicast());
        assert!(addr("10.0.0.1").is_global_unicast() && addr("2001:db8::1").is_global_unicast());
        for not_global in [
            "0.0.0.0",
            "255.255.255.255",
            "127.0.0.1",
            "224.0.0.1",
            "169.254.0.1",
            "::",
            "ff02::1",
        ] {
            assert!(!addr(not_global).is_global_unicast(), "{not_global}");
        }
        assert!(addr("::ffff:1.2.3.4").is_4in6() && !addr("1.2.3.4").is_4in6());
    }

    #[test]
    fn prefixes_parse_mask_and_contain_as_go_does() {
        for (input, want) in [
            ("192.168.0.0/24", Ok("192.168.0.0/24")),
            ("192.168.0.1/24", Ok("192.168.0.1/24")),
            ("::1/128", Ok("::1/128")),
            ("10.0.0.0/0", Ok("10.0.0.0/0")),
            ("10.0.0.0", Err(r#"netip.ParsePrefix("10.0.0.0"): no '/'"#)),
            (
                "10.0.0.0/33",
                Err(r#"netip.ParsePrefix("10.0.0.0/33"): prefix length out of range"#),
            ),
            (
                "10.0.0.0/08",
                Err(r#"netip.ParsePrefix("10.0.0.0/08"): bad bits after slash: "08""#),
            ),
            (
                "10.0.0.0/x",
                Err(r#"netip.ParsePrefix("10.0.0.0/x"): bad bits after slash: "x""#),
            ),
            (
                "fe80::1%eth0/64",
                Err(
                    r#"netip.ParsePrefix("fe80::1%eth0/64"): IPv6 zones cannot be present in a prefix"#,
                ),
            ),
            (
                "1.2.3/8",
                Err(r#"netip.ParsePrefix("1.2.3/8"): ParseAddr("1.2.3"): IPv4 address too short"#),
            ),
        ] {
            let got = parse_prefix(input).map(|p| p.to_string());
            assert_eq!(got.as_deref().map_err(String::as_str), want, "{input}");
        }
        let prefix = |s: &str| parse_prefix(s).expect(s);
        let addr = |s: &str| parse_addr(s).map(|p| p.addr).expect(s);
        assert_eq!(
            prefix("192.168.1.5/24").masked().to_string(),
            "192.168.1.0/24"
        );
        assert_eq!(
            prefix("2001:db8::1/32").masked().to_string(),
            "2001:db8::/32"
        );
        assert!(prefix("10.0.0.0/8").contains(addr("10.1.2.3")));
        assert!(!prefix("10.0.0.0/8").contains(addr("11.1.2.3")));
        assert!(!prefix("0.0.0.0/0").contains(addr("::1")));
        assert!(prefix("10.0.0.0/8").overlaps(prefix("10.1.0.0/16")));
        assert!(!prefix("10.0.0.0/16").overlaps(prefix("10.1.0.0/16")));
        assert!(!prefix("0.0.0.0/0").overlaps(prefix("::/0")));
    }
}
