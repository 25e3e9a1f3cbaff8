//! Network-value checks shared by services, endpoints and endpointslices, with
//! apimachinery's messages: IP addresses (parsed the way `netutils.ParseIPSloppy` does, so
//! IPv4 octets with leading zeros are accepted), CIDRs, "special" addresses, port numbers,
//! port names and protocols.

use std::net::{IpAddr, Ipv4Addr};

use serde_json::Value;

use super::causes::{go_value, invalid_raw};
use crate::status::{field_invalid, field_not_supported, field_required, StatusCause};

/// The protocols a port may use, sorted as kube lists them in `Unsupported value` errors.
pub(crate) const PORT_PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

/// Parses an IP address like Go's `ParseIPSloppy`: IPv4 octets may carry leading zeros
/// (read as decimal), which the standard library refuses, and an IPv4-mapped IPv6 address
/// (`::ffff:10.0.0.1`) is the IPv4 address it maps, as Go's `To4` makes it everywhere kube
/// tells the families apart.
pub(crate) fn parse_ip(value: &str) -> Option<IpAddr> {
    if let Ok(ip) = value.parse::<IpAddr>() {
        return Some(match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        });
    }
    let octets: Vec<&str> = value.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut bytes = [0u8; 4];
    for (slot, octet) in bytes.iter_mut().zip(&octets) {
        if octet.is_empty() || octet.len() > 3 || !octet.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        *slot = octet.parse::<u8>().ok()?;
    }
    Some(IpAddr::V4(Ipv4Addr::from(bytes)))
}

/// `validation.IsValidIP`.
pub(crate) fn valid_ip(field: &str, value: &str) -> Vec<StatusCause> {
    if parse_ip(value).is_some() {
        return Vec::new();
    }
    vec![field_invalid(
        field,
        value,
        "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
    )]
}

/// `validation.IsValidIPv4Address`.
pub(crate) fn valid_ipv4(field: &str, value: &str) -> Vec<StatusCause> {
    match parse_ip(value) {
        Some(IpAddr::V4(_)) => Vec::new(),
        _ => vec![field_invalid(field, value, "must be a valid IPv4 address")],
    }
}

/// `validation.IsValidIPv6Address`.
pub(crate) fn valid_ipv6(field: &str, value: &str) -> Vec<StatusCause> {
    match parse_ip(value) {
        Some(IpAddr::V6(_)) => Vec::new(),
        _ => vec![field_invalid(field, value, "must be a valid IPv6 address")],
    }
}

/// `ValidateNonSpecialIP`: endpoints and external IPs may not be unspecified, loopback or
/// link-local, since those mean something else on every node.
pub(crate) fn non_special_ip(field: &str, value: &str) -> Vec<StatusCause> {
    let Some(ip) = parse_ip(value) else {
        return vec![field_invalid(field, value, "must be a valid IP address")];
    };
    let mut causes = Vec::new();
    if ip.is_unspecified() {
        causes.push(field_invalid(
            field,
            value,
            &format!("may not be unspecified ({value})"),
        ));
    }
    if ip.is_loopback() {
        causes.push(field_invalid(
            field,
            value,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    if is_link_local_unicast(ip) {
        causes.push(field_invalid(
            field,
            value,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if is_link_local_multicast(ip) {
        causes.push(field_invalid(
            field,
            value,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
    causes
}

fn is_link_local_unicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[0] == 169 && v4.octets()[1] == 254,
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_link_local_multicast(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
        // Go: ff02::/16 (multicast with link-local scope).
        IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
    }
}

/// `validation.IsValidCIDR`.
pub(crate) fn valid_cidr(field: &str, value: &str) -> Vec<StatusCause> {
    let valid = value.split_once('/').is_some_and(|(addr, bits)| {
        let Ok(bits) = bits.parse::<u8>() else {
            return false;
        };
        // The family as written: `::ffff:10.0.0.0/104` is an IPv6 prefix.
        match parse_ip(addr) {
            Some(_) if addr.contains(':') => bits <= 128,
            Some(_) => bits <= 32,
            None => false,
        }
    });
    if valid {
        return Vec::new();
    }
    vec![field_invalid(
        field,
        value,
        "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
    )]
}

/// Whether an address is IPv6 (`netutils.IsIPv6String`).
pub(crate) fn is_ipv6(value: &str) -> bool {
    matches!(parse_ip(value), Some(IpAddr::V6(_)))
}

/// `validation.IsValidPortNum` for a JSON value: a bad port renders bare (`70000`).
pub(crate) fn valid_port_num(field: &str, value: Option<&Value>) -> Vec<StatusCause> {
    match value.and_then(Value::as_i64) {
        Some(n) if (1..=65535).contains(&n) => Vec::new(),
        _ => vec![invalid_raw(
            field,
            &go_value(value).replace("null", "0"),
            "must be between 1 and 65535, inclusive",
        )],
    }
}

/// `validation.IsValidPortName`'s messages (IANA service names).
pub(crate) fn port_name_messages(name: &str) -> Vec<String> {
    let mut messages = Vec::new();
    if name.len() > 15 {
        messages.push("must be no more than 15 characters".to_string());
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        messages
            .push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        messages.push("must contain at least one letter (a-z)".into());
    }
    if name.contains("--") {
        messages.push("must not contain consecutive hyphens".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        messages.push("must not begin or end with a hyphen".into());
    }
    messages
}

/// `ValidatePortNumOrName` for an int-or-string field such as `targetPort`.
pub(crate) fn valid_port_num_or_name(field: &str, value: Option<&Value>) -> Vec<StatusCause> {
    match value {
        Some(Value::String(name)) => port_name_messages(name)
            .iter()
            .map(|m| field_invalid(field, name, m))
            .collect(),
        other => valid_port_num(field, other),
    }
}

/// A port's `protocol`: required, and one of TCP, UDP, SCTP.
pub(crate) fn valid_protocol(field: &str, value: Option<&Value>) -> Vec<StatusCause> {
    match value.and_then(Value::as_str).unwrap_or("") {
        "" => vec![field_required(field, "")],
        p if PORT_PROTOCOLS.contains(&p) => Vec::new(),
        p => vec![field_not_supported(field, p, PORT_PROTOCOLS)],
    }
}

/// apimachinery's `GetWarningsForIP` for a value that validated: an address in a form the
/// next releases refuse (IPv4 octets with leading zeros, an IPv4-mapped IPv6 address) or an
/// IPv6 address not in RFC 5952's canonical form.
pub(crate) fn ip_warnings(field: &str, value: &str) -> Vec<String> {
    use crate::machinery::schema::cel::netip::{go_quote, parse_addr, Addr};
    let Some(ip) = parse_ip(value) else {
        return Vec::new();
    };
    match parse_addr(value) {
        Ok(parsed) if !parsed.addr.is_4in6() => {
            let canonical = parsed.addr.to_string();
            if matches!(parsed.addr, Addr::V6(_)) && canonical != value {
                vec![format!(
                    "{field}: IPv6 address {} should be in RFC 5952 canonical format ({})",
                    go_quote(value),
                    go_quote(&canonical)
                )]
            } else {
                Vec::new()
            }
        }
        _ => vec![format!(
            "{field}: non-standard IP address {} will be considered invalid in a future Kubernetes release: use {}",
            go_quote(value),
            go_quote(&ip.to_string())
        )],
    }
}

/// apimachinery's `GetWarningsForCIDR` for a value that validated: host bits set after the
/// prefix (which of two values was meant?), a form the next releases refuse, or an IPv6
/// prefix not in canonical form.
pub(crate) fn cidr_warnings(field: &str, value: &str) -> Vec<String> {
    use crate::machinery::schema::cel::netip::{go_quote, parse_prefix, Addr};
    let Some((addr, bits)) = value.split_once('/') else {
        return Vec::new();
    };
    let (Some(ip), Ok(bits)) = (parse_ip(addr), bits.parse::<u8>()) else {
        return Vec::new();
    };
    // An IPv4-mapped prefix (`::ffff:10.0.0.0/104`) is the IPv4 one it maps, as Go's `IPNet`
    // prints it.
    let bits = if addr.contains(':') && ip.is_ipv4() {
        bits.saturating_sub(96)
    } else {
        bits
    };
    let (network, addr_len) = match ip {
        IpAddr::V4(v4) => {
            let mask = u32::MAX
                .checked_shl(32 - u32::from(bits.min(32)))
                .unwrap_or(0);
            (IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask)), 32)
        }
        IpAddr::V6(v6) => {
            let mask = u128::MAX
                .checked_shl(128 - u32::from(bits.min(128)))
                .unwrap_or(0);
            (
                IpAddr::V6(std::net::Ipv6Addr::from(u128::from(v6) & mask)),
                128,
            )
        }
    };
    let network_text = format!("{network}/{bits}");
    let mut warnings = Vec::new();
    if ip != network {
        warnings.push(format!(
            "{field}: CIDR value {} is ambiguous in this context (should be {} or {}?)",
            go_quote(value),
            go_quote(&network_text),
            go_quote(&format!("{ip}/{addr_len}"))
        ));
    }
    let prefix = parse_prefix(value);
    match &prefix {
        Ok(prefix) if !prefix.addr.is_4in6() => {
            let canonical = prefix.to_string();
            if warnings.is_empty() && matches!(prefix.addr, Addr::V6(_)) && canonical != value {
                warnings.push(format!(
                    "{field}: IPv6 CIDR value {} should be in RFC 5952 canonical format ({})",
                    go_quote(value),
                    go_quote(&canonical)
                ));
            }
        }
        _ => warnings.push(format!(
            "{field}: non-standard CIDR value {} will be considered invalid in a future Kubernetes release: use {}",
            go_quote(value),
            go_quote(&network_text)
        )),
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// apimachinery 1.33's `TestGetWarningsForIP` cases.
    #[test]
    fn ip_warnings_are_apimachinerys() {
        let none: Vec<String> = Vec::new();
        assert_eq!(ip_warnings("spec.clusterIPs[0]", "192.12.2.2"), none);
        assert_eq!(ip_warnings("spec.clusterIPs[0]", "2001:db8::2"), none);
        assert_eq!(
            ip_warnings("spec.clusterIPs[0]", "192.012.2.2"),
            [
                r#"spec.clusterIPs[0]: non-standard IP address "192.012.2.2" will be considered invalid in a future Kubernetes release: use "192.12.2.2""#
            ]
        );
        assert_eq!(
            ip_warnings("spec.clusterIPs[0]", "::ffff:192.12.2.2"),
            [
                r#"spec.clusterIPs[0]: non-standard IP address "::ffff:192.12.2.2" will be considered invalid in a future Kubernetes release: use "192.12.2.2""#
            ]
        );
        assert_eq!(
            ip_warnings("spec.loadBalancerIP", "2001:db8:0:0::2"),
            [
                r#"spec.loadBalancerIP: IPv6 address "2001:db8:0:0::2" should be in RFC 5952 canonical format ("2001:db8::2")"#
            ]
        );
        // A mapped address is the IPv4 one, as Go's To4 makes it.
        assert_eq!(
            parse_ip("::ffff:10.100.0.99"),
            Some(IpAddr::V4(Ipv4Addr::new(10, 100, 0, 99)))
        );
    }

    /// apimachinery 1.33's `TestGetWarningsForCIDR` cases.
    #[test]
    fn cidr_warnings_are_apimachinerys() {
        let field = "spec.loadBalancerSourceRanges[0]";
        let none: Vec<String> = Vec::new();
        assert_eq!(cidr_warnings(field, "192.12.2.0/24"), none);
        assert_eq!(cidr_warnings(field, "2001:db8::/64"), none);
        for (cidr, want) in [
            (
                "192.012.2.0/24",
                vec![
                    r#"spec.loadBalancerSourceRanges[0]: non-standard CIDR value "192.012.2.0/24" will be considered invalid in a future Kubernetes release: use "192.12.2.0/24""#,
                ],
            ),
            (
                "192.12.2.0/024",
                vec![
                    r#"spec.loadBalancerSourceRanges[0]: non-standard CIDR value "192.12.2.0/024" will be considered invalid in a future Kubernetes release: use "192.12.2.0/24""#,
                ],
            ),
            (
                "::ffff:192.12.2.0/120",
                vec![
                    r#"spec.loadBalancerSourceRanges[0]: non-standard CIDR value "::ffff:192.12.2.0/120" will be considered invalid in a future Kubernetes release: use "192.12.2.0/24""#,
                ],
            ),
            (
                "192.12.2.8/24",
                vec![
                    r#"spec.loadBalancerSourceRanges[0]: CIDR value "192.12.2.8/24" is ambiguous in this context (should be "192.12.2.0/24" or "192.12.2.8/32"?)"#,
                ],
            ),
            (
                "192.012.2.8/24",
                vec![
                    r#"spec.loadBalancerSourceRanges[0]: CIDR value "192.012.2.8/24" is ambiguous in this context (should be "192.12.2.0/24" or "192.12.2.8/32"?)"#,
                    r#"spec.loadBalancerSourceRanges[0]: non-standard CIDR value "192.012.2.8/24" will be considered invalid in a future Kubernetes release: use "192.12.2.0/24""#,
                ],
            ),
            (
                "2001:db8:0:0::/64",
                vec![
                    r#"spec.loadBalancerSourceRanges[0]: IPv6 CIDR value "2001:db8:0:0::/64" should be in RFC 5952 canonical format ("2001:db8::/64")"#,
                ],
            ),
        ] {
            assert_eq!(cidr_warnings(field, cidr), want, "{cidr}");
        }
    }

    #[test]
    fn sloppy_ipv4_accepts_leading_zeros() {
        assert_eq!(
            parse_ip("010.000.0.1"),
            Some(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)))
        );
        assert!(parse_ip("10.0.0").is_none());
        assert!(parse_ip("fd00::1").is_some());
        assert!(parse_ip("256.0.0.1").is_none());
    }

    #[test]
    fn special_addresses_are_refused() {
        assert_eq!(non_special_ip("ip", "127.0.0.1").len(), 1);
        assert_eq!(non_special_ip("ip", "0.0.0.0").len(), 1);
        assert_eq!(non_special_ip("ip", "169.254.1.1").len(), 1);
        assert_eq!(non_special_ip("ip", "224.0.0.5").len(), 1);
        assert_eq!(non_special_ip("ip", "fe80::1").len(), 1);
        assert!(non_special_ip("ip", "10.1.2.3").is_empty());
    }

    #[test]
    fn ports() {
        assert!(valid_port_num("p", Some(&json!(80))).is_empty());
        let c = valid_port_num("spec.ports[0].port", Some(&json!(70000)));
        assert_eq!(
            c[0].message,
            "Invalid value: 70000: must be between 1 and 65535, inclusive"
        );
        assert_eq!(
            valid_port_num("p", None)[0].message,
            "Invalid value: 0: must be between 1 and 65535, inclusive"
        );
        assert!(port_name_messages("http").is_empty());
        assert_eq!(port_name_messages("8080").len(), 1);
        assert_eq!(
            valid_protocol("p", Some(&json!("ICMP")))[0].message,
            "Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        );
        assert!(valid_cidr("c", "10.0.0.0/8").is_empty());
        assert_eq!(valid_cidr("c", "10.0.0.0/33").len(), 1);
    }
}
