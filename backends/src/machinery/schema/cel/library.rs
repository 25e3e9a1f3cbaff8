//! The Kubernetes CEL libraries kube-apiserver 1.32 gives CRD validation rules
//! (`k8s.io/apiserver/pkg/cel/library`, `environment/base.go`), registered once on the shared
//! [`Env`]: [`register`] adds the quantity, URL, IP, CIDR, regex, lists, format and sets
//! libraries, plus what compiling a rule needs to know about them (namespaced function names,
//! nameable types, result kinds, regexes checked when a program is instantiated).
//!
//! kube's `Quantity`, `URL`, `IP`, `CIDR` and `NamedFormat` object types are opaque values
//! here: Rust types implementing the crate's `Val` (see [`opaque_value`]) with CEL types of
//! kube's names, so `type(x)`, `==` and overload selection behave as in kube.

use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use cel::common::types::{CelBool, CelInt, CelString};
use cel::common::value::{CowVal, FromVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

/// The arguments an overload receives and what it returns.
pub(super) type Args<'b, 'v> = Vec<CowVal<'b, 'v>>;
pub(super) type Returns<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// Registers every library on `env` (once, when the shared environment is built).
pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    super::quantity::register(env)?;
    super::urls::register(env)?;
    super::ip::register(env)?;
    super::cidr::register(env)?;
    super::regexp::register(env)?;
    super::lists::register(env)?;
    super::format::register(env)?;
    super::sets::register(env)?;
    Ok(())
}

/// Functions called with a namespace (`format.named(..)`): the parser sees `format` as the
/// call's target, which is no identifier kube would call undeclared.
const NAMESPACED_FUNCTIONS: &[&str] = &[
    "ip.isCanonical",
    "format.named",
    "format.dns1123Label",
    "format.dns1123Subdomain",
    "format.dns1035Label",
    "format.qualifiedName",
    "format.dns1123LabelPrefix",
    "format.dns1123SubdomainPrefix",
    "format.dns1035LabelPrefix",
    "format.labelValue",
    "format.uri",
    "format.uuid",
    "format.byte",
    "format.date",
    "format.datetime",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
];

/// Whether `namespace.function` is one of the libraries' namespaced functions.
pub(super) fn is_namespaced_function(namespace: &str, function: &str) -> bool {
    NAMESPACED_FUNCTIONS.iter().any(|qualified| {
        qualified
            .strip_prefix(namespace)
            .and_then(|rest| rest.strip_prefix('.'))
            == Some(function)
    })
}

/// Type names rules may spell: kube declares `net.IP` and `net.CIDR` as variables holding
/// the types (`type(x) == net.IP`); its other library types cannot be named.
pub(super) fn is_type_name(namespace: &str, name: &str) -> bool {
    namespace == "net" && matches!(name, "IP" | "CIDR")
}

/// The type of what a call to a library function returns, when its name alone says (the
/// compile-time check that a rule is a bool and a message expression a string).
pub(super) fn result_kind(function: &str) -> Option<&'static str> {
    Some(match function {
        "isQuantity"
        | "isInteger"
        | "isGreaterThan"
        | "isLessThan"
        | "isURL"
        | "isIP"
        | "isCIDR"
        | "isCanonical"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast"
        | "containsIP"
        | "containsCIDR"
        | "isSorted"
        | "equivalent"
        | "intersects" => "bool",
        "asInteger" | "sign" | "compareTo" | "family" | "prefixLength" | "indexOf"
        | "lastIndexOf" => "int",
        "asApproximateFloat" => "double",
        "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath" | "find" => "string",
        "findAll" => "list",
        "getQuery" => "map",
        "quantity" | "add" | "sub" => super::quantity::QUANTITY_TYPE.name(),
        "url" => super::urls::URL_TYPE.name(),
        "ip" => super::ip::IP_TYPE.name(),
        "cidr" | "masked" => super::cidr::CIDR_TYPE.name(),
        "named" | "validate" => "optional_type",
        "dns1123Label"
        | "dns1123Subdomain"
        | "dns1035Label"
        | "qualifiedName"
        | "dns1123LabelPrefix"
        | "dns1123SubdomainPrefix"
        | "dns1035LabelPrefix"
        | "labelValue"
        | "uri"
        | "uuid"
        | "byte"
        | "date"
        | "datetime" => super::format::FORMAT_TYPE.name(),
        _ => return None,
    })
}

/// What kube's `env.Program` refuses in an expression that compiled: a `find`/`findAll`
/// whose pattern is a literal that is no regular expression (kube compiles such patterns
/// once, when the program is built). Returns kube's detail.
pub(super) fn instantiation_error(expr: &IdedExpr) -> Option<String> {
    match &expr.expr {
        Expr::Call(call) => {
            if matches!(call.func_name.as_str(), "find" | "findAll") && call.target.is_some() {
                if let Some(IdedExpr {
                    expr: Expr::Literal(LiteralValue::String(pattern)),
                    ..
                }) = call.args.first()
                {
                    if let Err(err) = super::regexp::compiled(pattern) {
                        return Some(format!("program instantiation failed: {err}"));
                    }
                }
            }
            call.target
                .iter()
                .map(|t| t.as_ref())
                .chain(call.args.iter())
                .find_map(instantiation_error)
        }
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .find_map(instantiation_error),
        Expr::List(list) => list.elements.iter().find_map(instantiation_error),
        Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
            cel::common::ast::EntryExpr::MapEntry(m) => {
                instantiation_error(&m.key).or_else(|| instantiation_error(&m.value))
            }
            _ => None,
        }),
        Expr::Select(sel) => instantiation_error(&sel.operand),
        _ => None,
    }
}

/// `args` as the `N` arguments of an overload (the environment only calls an overload with
/// as many arguments as it declares).
pub(super) fn take<'b, 'v, const N: usize>(
    args: Args<'b, 'v>,
) -> Result<[CowVal<'b, 'v>; N], ExecutionError> {
    args.try_into()
        .map_err(|args: Vec<_>| ExecutionError::invalid_argument_count(N, args.len()))
}

/// `val` as the `T` its overload was declared for.
pub(super) fn arg<'a, 'v, T: FromVal<'a, 'v> + Val>(
    function: &str,
    val: &'a (dyn Val + 'v),
) -> Result<&'a T, ExecutionError> {
    val.downcast_ref::<T>().ok_or_else(|| {
        ExecutionError::no_such_overload(function, vec![val.get_type().name().to_owned()])
    })
}

/// A string argument.
pub(super) fn string_arg<'a>(
    function: &str,
    val: &'a (dyn Val + '_),
) -> Result<&'a str, ExecutionError> {
    Ok(arg::<CelString>(function, val)?.inner())
}

/// An int argument.
pub(super) fn int_arg(function: &str, val: &(dyn Val + '_)) -> Result<i64, ExecutionError> {
    Ok(*arg::<CelInt>(function, val)?.inner())
}

/// An error as kube reports it (`types.NewErr(message)`): the rule's error is `message`.
pub(super) fn failure(function: &str, message: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, message)
}

/// cel-go's `no such overload` error (what kube's bindings return for arguments of the
/// wrong type, reported by the validator as `'no such overload'`).
pub(super) fn no_such_overload(function: &str, args: &[&dyn Val]) -> ExecutionError {
    ExecutionError::no_such_overload(
        function,
        args.iter()
            .map(|a| a.get_type().name().to_owned())
            .collect(),
    )
}

pub(super) fn bool_val<'b, 'v>(b: bool) -> Returns<'b, 'v> {
    Ok(CowVal::owned(CelBool::from(b)))
}

pub(super) fn int_val<'b, 'v>(i: i64) -> Returns<'b, 'v> {
    Ok(CowVal::owned(CelInt::from(i)))
}

pub(super) fn string_val<'b, 'v>(s: String) -> Returns<'b, 'v> {
    Ok(CowVal::owned(CelString::from(s)))
}

/// Implements the crate's `Val` for a library's opaque value type: the CEL type is the
/// given `static` (named as kube names it), equality is the Rust type's `PartialEq` (kube's
/// `Equal`), and values can be recovered with `downcast_ref`.
macro_rules! opaque_value {
    ($rust:ty, $cel_type:path) => {
        impl cel::common::value::Val for $rust {
            fn get_type(&self) -> &cel::common::types::Type {
                &$cel_type
            }

            fn cel_type() -> &'static cel::common::types::Type {
                &$cel_type
            }

            fn equals(&self, other: &dyn cel::common::value::Val) -> bool {
                other.downcast_ref::<$rust>().is_some_and(|o| self == o)
            }

            fn clone_as_boxed<'v>(&self) -> Box<dyn cel::common::value::Val + 'v>
            where
                Self: 'v,
            {
                Box::new(self.clone())
            }

            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
        }

        impl cel::common::value::StaticVal for $rust {}
    };
}
pub(super) use opaque_value;

/// Evaluates `source` in the shared environment with no variables, for the libraries' tests.
#[cfg(test)]
pub(super) fn eval(source: &str) -> Result<cel::Value, String> {
    let program = super::env().compile(source).map_err(|e| e.to_string())?;
    let context = cel::Context::with_env(std::sync::Arc::clone(super::env()));
    program.execute(&context).map_err(|err| match err {
        ExecutionError::FunctionError { message, .. } => message,
        ExecutionError::NoSuchOverload(_) => "no such overload".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        other => other.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_library_registers_on_a_fresh_environment() {
        let mut env = Env::stdlib();
        assert_eq!(register(&mut env), Ok(()));
    }

    #[test]
    fn namespaced_functions_and_type_names_are_known() {
        assert!(is_namespaced_function("format", "named"));
        assert!(is_namespaced_function("sets", "contains"));
        assert!(is_namespaced_function("ip", "isCanonical"));
        assert!(!is_namespaced_function("ip", "family"));
        assert!(!is_namespaced_function("form", "at.named"));
        assert!(is_type_name("net", "IP") && is_type_name("net", "CIDR"));
        assert!(!is_type_name("net", "URL"));
        assert_eq!(
            eval("type(ip('1.2.3.4')) == net.IP"),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(
            eval("type(cidr('1.2.3.0/24')) == net.CIDR && type(ip('::1')) != net.CIDR"),
            Ok(cel::Value::Bool(true))
        );
    }
}
