//! kube's CEL IP library (`library/ip.go`): `ip(string)`, `isIP(string)`,
//! `ip.isCanonical(string)`, `string(ip)`, and the methods `family`, `isUnspecified`,
//! `isLoopback`, `isLinkLocalMulticast`, `isLinkLocalUnicast` and `isGlobalUnicast`. Values
//! are opaque `net.IP`s; like kube, addresses with a zone and IPv4-mapped IPv6 addresses are
//! refused.

use cel::common::types::{Kind, Type, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{
    arg, bool_val, failure, int_val, opaque_value, string_arg, string_val, take, Args, Returns,
};
use super::netip::{self, go_quote, Addr};

/// `apiservercel.IPType`.
pub(super) static IP_TYPE: Type = Type::simple_type(Kind::Opaque, "net.IP");

/// A `net.IP` value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct IpVal(pub(super) Addr);

opaque_value!(IpVal, IP_TYPE);

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    // `net.IP` names the type in rules (`type(x) == net.IP`).
    env.add_type(IP_TYPE.to_owned())?;
    let ip = || IP_TYPE.to_owned();
    env.add_overload("ip", "string_to_ip", vec![STRING_TYPE], to_ip)?;
    env.add_overload("isIP", "is_ip", vec![STRING_TYPE], is_ip)?;
    env.add_overload(
        "ip.isCanonical",
        "ip_is_canonical",
        vec![STRING_TYPE],
        is_canonical,
    )?;
    env.add_overload("string", "ip_to_string", vec![ip()], to_string)?;
    let members: [(&str, &str, cel::common::functions::Function); 6] = [
        ("family", "ip_family", family),
        ("isUnspecified", "ip_is_unspecified", is_unspecified),
        ("isLoopback", "ip_is_loopback", is_loopback),
        (
            "isLinkLocalMulticast",
            "ip_is_link_local_multicast",
            is_link_local_multicast,
        ),
        (
            "isLinkLocalUnicast",
            "ip_is_link_local_unicast",
            is_link_local_unicast,
        ),
        ("isGlobalUnicast", "ip_is_global_unicast", is_global_unicast),
    ];
    for (name, id, function) in members {
        env.add_member_overload(name, id, ip(), vec![], function)?;
    }
    Ok(())
}

/// `parseIPAddr`: an address without a zone that is not IPv4-mapped, or kube's error.
pub(super) fn parse(raw: &str) -> Result<Addr, String> {
    let parsed = netip::parse_addr(raw).map_err(|err| {
        format!(
            "IP Address {} parse error during conversion from string: {err}",
            go_quote(raw)
        )
    })?;
    if !parsed.zone.is_empty() {
        return Err(format!(
            "IP address {} with zone value is not allowed",
            go_quote(raw)
        ));
    }
    if parsed.addr.is_4in6() {
        return Err(format!(
            "IPv4-mapped IPv6 address {} is not allowed",
            go_quote(raw)
        ));
    }
    Ok(parsed.addr)
}

fn to_ip<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text] = take(args)?;
    let addr = parse(string_arg("ip", text.as_ref())?).map_err(|err| failure("ip", err))?;
    Ok(CowVal::owned(IpVal(addr)))
}

fn is_ip<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text] = take(args)?;
    bool_val(parse(string_arg("isIP", text.as_ref())?).is_ok())
}

/// Whether the string is the address as Go prints it (no leading zeros, `::` compression).
fn is_canonical<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text] = take(args)?;
    let raw = string_arg("ip.isCanonical", text.as_ref())?;
    let addr = parse(raw).map_err(|err| failure("ip.isCanonical", err))?;
    bool_val(addr.to_string() == raw)
}

fn addr(function: &str, val: &CowVal<'_, '_>) -> Result<Addr, ExecutionError> {
    Ok(arg::<IpVal>(function, val.as_ref())?.0)
}

fn to_string<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [ip] = take(args)?;
    string_val(addr("string", &ip)?.to_string())
}

fn family<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [ip] = take(args)?;
    int_val(match addr("family", &ip)? {
        Addr::V4(_) => 4,
        Addr::V6(_) => 6,
    })
}

fn is_unspecified<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [ip] = take(args)?;
    bool_val(addr("isUnspecified", &ip)?.is_unspecified())
}

fn is_loopback<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [ip] = take(args)?;
    bool_val(addr("isLoopback", &ip)?.is_loopback())
}

fn is_link_local_multicast<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [ip] = take(args)?;
    bool_val(addr("isLinkLocalMulticast", &ip)?.is_link_local_multicast())
}

fn is_link_local_unicast<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [ip] = take(args)?;
    bool_val(addr("isLinkLocalUnicast", &ip)?.is_link_local_unicast())
}

fn is_global_unicast<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [ip] = take(args)?;
    bool_val(addr("isGlobalUnicast", &ip)?.is_global_unicast())
}

#[cfg(test)]
mod tests {
    use cel::Value;

    use super::super::library::eval;

    #[test]
    fn the_ip_library_behaves_as_kubes() {
        let t = |v: bool| Ok(Value::Bool(v));
        let cases: Vec<(&str, Result<Value, String>)> = vec![
            ("isIP('1.2.3.4') && isIP('2001:db8::1')", t(true)),
            ("isIP('1.2.3') || isIP('fe80::1%eth0') || isIP('::ffff:1.2.3.4')", t(false)),
            ("string(ip('192.168.0.1'))", Ok(Value::from("192.168.0.1"))),
            ("string(ip('2001:0db8::0001'))", Ok(Value::from("2001:db8::1"))),
            ("ip('192.168.0.1').family()", Ok(Value::Int(4))),
            ("ip('::1').family()", Ok(Value::Int(6))),
            ("ip.isCanonical('127.0.0.1') && ip.isCanonical('2001:db8::abcd')", t(true)),
            ("ip.isCanonical('2001:DB8::ABCD') || ip.isCanonical('2001:db8:0::abcd')", t(false)),
            ("ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified()", t(true)),
            ("ip('127.0.0.1').isLoopback() && !ip('10.0.0.1').isLoopback()", t(true)),
            ("ip('224.0.0.1').isLinkLocalMulticast() && ip('ff02::1').isLinkLocalMulticast()", t(true)),
            ("ip('169.254.169.254').isLinkLocalUnicast() && ip('fe80::1').isLinkLocalUnicast()", t(true)),
            ("ip('192.168.0.1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()", t(true)),
            ("ip('1.2.3.4') == ip('1.2.3.4') && ip('1.2.3.4') != ip('1.2.3.5')", t(true)),
            (
                "ip('1.2.3')",
                Err(r#"IP Address "1.2.3" parse error during conversion from string: ParseAddr("1.2.3"): IPv4 address too short"#.into()),
            ),
            ("ip('fe80::1%eth0')", Err(r#"IP address "fe80::1%eth0" with zone value is not allowed"#.into())),
            ("ip('::ffff:1.2.3.4')", Err(r#"IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed"#.into())),
            (
                "ip.isCanonical('x')",
                Err(r#"IP Address "x" parse error during conversion from string: ParseAddr("x"): unable to parse IP"#.into()),
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(expr), want, "{expr}");
        }
    }
}
