//! kube's CEL CIDR library (`library/cidr.go`): `cidr(string)`, `isCIDR(string)`,
//! `string(cidr)`, and the methods `containsIP` (an IP or a string), `containsCIDR` (a CIDR
//! or a string), `ip`, `masked` and `prefixLength`. Values are opaque `net.CIDR`s; the
//! address is kept as written (`cidr('10.0.0.1/8').ip()` is `10.0.0.1`).

use cel::common::types::{Kind, Type, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError};

use super::ip::{self, IpVal, IP_TYPE};
use super::library::{
    arg, bool_val, failure, int_val, no_such_overload, opaque_value, string_arg, string_val, take,
    Args, Returns,
};
use super::netip::{self, go_quote, Prefix};

/// `apiservercel.CIDRType`.
pub(super) static CIDR_TYPE: Type = Type::simple_type(Kind::Opaque, "net.CIDR");

/// A `net.CIDR` value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CidrVal(Prefix);

opaque_value!(CidrVal, CIDR_TYPE);

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_type(CIDR_TYPE.to_owned())?;
    let cidr = || CIDR_TYPE.to_owned();
    env.add_overload("cidr", "string_to_cidr", vec![STRING_TYPE], to_cidr)?;
    env.add_overload("isCIDR", "is_cidr", vec![STRING_TYPE], is_cidr)?;
    env.add_overload("string", "cidr_to_string", vec![cidr()], to_string)?;
    let members: [(&str, &str, Vec<Type>, cel::common::functions::Function); 7] = [
        (
            "containsIP",
            "cidr_contains_ip_string",
            vec![STRING_TYPE],
            contains_ip_string,
        ),
        (
            "containsIP",
            "cidr_contains_ip_ip",
            vec![IP_TYPE.to_owned()],
            contains_ip,
        ),
        (
            "containsCIDR",
            "cidr_contains_cidr_string",
            vec![STRING_TYPE],
            contains_cidr_string,
        ),
        (
            "containsCIDR",
            "cidr_contains_cidr",
            vec![cidr()],
            contains_cidr,
        ),
        ("ip", "cidr_ip", vec![], address),
        ("prefixLength", "cidr_prefix_length", vec![], prefix_length),
        ("masked", "cidr_masked", vec![], masked),
    ];
    for (name, id, args, function) in members {
        env.add_member_overload(name, id, cidr(), args, function)?;
    }
    Ok(())
}

/// `parseCIDR`, with `stringToCIDR`'s prefix: kube words parse errors with the prefix twice.
fn parse(raw: &str) -> Result<Prefix, String> {
    const CONTEXT: &str = "network address parse error during conversion from string";
    let prefix = netip::parse_prefix(raw).map_err(|err| format!("{CONTEXT}: {CONTEXT}: {err}"))?;
    if prefix.addr.is_4in6() {
        return Err(format!(
            "{CONTEXT}: IPv4-mapped IPv6 address {} is not allowed",
            go_quote(raw)
        ));
    }
    Ok(prefix)
}

fn to_cidr<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text] = take(args)?;
    let prefix = parse(string_arg("cidr", text.as_ref())?).map_err(|err| failure("cidr", err))?;
    Ok(CowVal::owned(CidrVal(prefix)))
}

fn is_cidr<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text] = take(args)?;
    bool_val(parse(string_arg("isCIDR", text.as_ref())?).is_ok())
}

fn prefix(function: &str, val: &CowVal<'_, '_>) -> Result<Prefix, ExecutionError> {
    Ok(arg::<CidrVal>(function, val.as_ref())?.0)
}

fn to_string<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [cidr] = take(args)?;
    string_val(prefix("string", &cidr)?.to_string())
}

fn contains_ip<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [cidr, ip] = take(args)?;
    let addr = arg::<IpVal>("containsIP", ip.as_ref())?.0;
    bool_val(prefix("containsIP", &cidr)?.contains(addr))
}

/// kube converts the string with `ip()` and, when that fails, reports no such overload
/// rather than the parse error.
fn contains_ip_string<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [cidr, text] = take(args)?;
    let network = prefix("containsIP", &cidr)?;
    match ip::parse(string_arg("containsIP", text.as_ref())?) {
        Ok(addr) => bool_val(network.contains(addr)),
        Err(_) => Err(no_such_overload(
            "containsIP",
            &[cidr.as_ref(), text.as_ref()],
        )),
    }
}

/// `Overlaps` and no shorter than the receiver: every address of `other` is in `network`.
fn contains(network: Prefix, other: Prefix) -> bool {
    network.overlaps(other) && network.bits <= other.bits
}

fn contains_cidr<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [cidr, other] = take(args)?;
    bool_val(contains(
        prefix("containsCIDR", &cidr)?,
        prefix("containsCIDR", &other)?,
    ))
}

/// kube converts the string with `cidr()`, whose error is the call's.
fn contains_cidr_string<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [cidr, text] = take(args)?;
    let network = prefix("containsCIDR", &cidr)?;
    let other = parse(string_arg("containsCIDR", text.as_ref())?)
        .map_err(|err| failure("containsCIDR", err))?;
    bool_val(contains(network, other))
}

fn address<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [cidr] = take(args)?;
    Ok(CowVal::owned(IpVal(prefix("ip", &cidr)?.addr)))
}

fn prefix_length<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [cidr] = take(args)?;
    int_val(i64::from(prefix("prefixLength", &cidr)?.bits))
}

fn masked<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [cidr] = take(args)?;
    Ok(CowVal::owned(CidrVal(prefix("masked", &cidr)?.masked())))
}

#[cfg(test)]
mod tests {
    use cel::Value;

    use super::super::library::eval;

    #[test]
    fn the_cidr_library_behaves_as_kubes() {
        let t = |v: bool| Ok(Value::Bool(v));
        let cases: Vec<(&str, Result<Value, String>)> = vec![
            ("isCIDR('10.0.0.0/8') && isCIDR('2001:db8::/32')", t(true)),
            ("isCIDR('10.0.0.0') || isCIDR('10.0.0.0/33') || isCIDR('::ffff:1.2.3.4/128')", t(false)),
            ("string(cidr('192.168.0.0/24'))", Ok(Value::from("192.168.0.0/24"))),
            ("string(cidr('2001:0db8::/32'))", Ok(Value::from("2001:db8::/32"))),
            ("cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))", t(true)),
            ("cidr('192.168.0.0/24').containsIP('192.168.1.1')", t(false)),
            ("cidr('::/0').containsIP('1.2.3.4')", t(false)),
            ("cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24'))", t(true)),
            ("cidr('192.168.0.0/24').containsCIDR('192.168.0.0/16')", t(false)),
            ("cidr('192.168.0.0/24').containsCIDR('192.168.0.0/24')", t(true)),
            ("cidr('192.168.0.1/24').ip() == ip('192.168.0.1')", t(true)),
            ("cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')", t(true)),
            ("cidr('192.168.0.1/24') == cidr('192.168.0.0/24')", t(false)),
            ("cidr('192.168.0.0/24').prefixLength()", Ok(Value::Int(24))),
            ("string(cidr('192.168.0.1/24').masked())", Ok(Value::from("192.168.0.0/24"))),
            (
                "cidr('10.0.0.0/33')",
                Err(r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range"#.into()),
            ),
            (
                "cidr('::ffff:1.2.3.4/120')",
                Err(r#"network address parse error during conversion from string: IPv4-mapped IPv6 address "::ffff:1.2.3.4/120" is not allowed"#.into()),
            ),
            ("cidr('10.0.0.0/8').containsIP('10.0.0')", Err("no such overload".into())),
            (
                "cidr('10.0.0.0/8').containsCIDR('10.0.0.0')",
                Err(r#"network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix("10.0.0.0"): no '/'"#.into()),
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(expr), want, "{expr}");
        }
    }
}
