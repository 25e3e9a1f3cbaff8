//! kube's CEL quantity library (`library/quantity.go`): `quantity(string)`,
//! `isQuantity(string)`, `sign(quantity)` (a global function in kube, not a method) and the
//! methods `isInteger`, `asInteger`, `asApproximateFloat`, `add`/`sub` (a quantity or an int),
//! `compareTo`, `isGreaterThan` and `isLessThan`. Values are opaque `kubernetes.Quantity`s
//! over [`resource_quantity::Quantity`](super::resource_quantity::Quantity).

use cel::common::types::{CelDouble, Kind, Type, INT_TYPE, STRING_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env};

use super::library::{
    arg, bool_val, failure, int_arg, int_val, opaque_value, string_arg, take, Args, Returns,
};
use super::resource_quantity::{self, Quantity};

/// `apiservercel.QuantityType`.
pub(super) static QUANTITY_TYPE: Type = Type::simple_type(Kind::Opaque, "kubernetes.Quantity");

/// A `kubernetes.Quantity` value.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct QuantityVal(Quantity);

opaque_value!(QuantityVal, QUANTITY_TYPE);

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let quantity_type = || QUANTITY_TYPE.to_owned();
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        to_quantity,
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    env.add_overload("sign", "quantity_sign", vec![quantity_type()], sign)?;
    let members: [(&str, &str, Vec<Type>, cel::common::functions::Function); 10] = [
        (
            "isGreaterThan",
            "quantity_is_greater_than",
            vec![quantity_type()],
            is_greater_than,
        ),
        (
            "isLessThan",
            "quantity_is_less_than",
            vec![quantity_type()],
            is_less_than,
        ),
        (
            "compareTo",
            "quantity_compare_to",
            vec![quantity_type()],
            compare_to,
        ),
        (
            "asApproximateFloat",
            "quantity_get_float",
            vec![],
            as_approximate_float,
        ),
        ("asInteger", "quantity_get_int", vec![], as_integer),
        ("isInteger", "quantity_is_integer", vec![], is_integer),
        ("add", "quantity_add", vec![quantity_type()], add),
        ("add", "quantity_add_int", vec![INT_TYPE], add_int),
        ("sub", "quantity_sub", vec![quantity_type()], sub),
        ("sub", "quantity_sub_int", vec![INT_TYPE], sub_int),
    ];
    for (name, id, args, function) in members {
        env.add_member_overload(name, id, quantity_type(), args, function)?;
    }
    Ok(())
}

fn to_quantity<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text] = take(args)?;
    let parsed = resource_quantity::parse(string_arg("quantity", text.as_ref())?)
        .map_err(|err| failure("quantity", err))?;
    Ok(CowVal::owned(QuantityVal(parsed)))
}

fn is_quantity<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text] = take(args)?;
    bool_val(resource_quantity::parse(string_arg("isQuantity", text.as_ref())?).is_ok())
}

/// The receiver (and operand) of a quantity method.
fn quantity<'a>(
    function: &str,
    val: &'a CowVal<'_, '_>,
) -> Result<&'a Quantity, cel::ExecutionError> {
    Ok(&arg::<QuantityVal>(function, val.as_ref())?.0)
}

fn sign<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [q] = take(args)?;
    int_val(quantity("sign", &q)?.sign())
}

fn compare<'b, 'v>(
    function: &str,
    args: Args<'b, 'v>,
) -> Result<std::cmp::Ordering, cel::ExecutionError> {
    let [a, b] = take(args)?;
    Ok(quantity(function, &a)?.cmp(quantity(function, &b)?))
}

fn is_greater_than<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    bool_val(compare("isGreaterThan", args)?.is_gt())
}

fn is_less_than<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    bool_val(compare("isLessThan", args)?.is_lt())
}

fn compare_to<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    int_val(compare("compareTo", args)? as i64)
}

fn as_approximate_float<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [q] = take(args)?;
    let value = quantity("asApproximateFloat", &q)?.as_approximate_float64();
    Ok(CowVal::owned(CelDouble::from(value)))
}

fn as_integer<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [q] = take(args)?;
    match quantity("asInteger", &q)?.as_int64() {
        Some(value) => int_val(value),
        None => Err(failure("asInteger", "cannot convert value to integer")),
    }
}

fn is_integer<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [q] = take(args)?;
    bool_val(quantity("isInteger", &q)?.as_int64().is_some())
}

/// The result of `add`/`sub`, a new quantity (the receiver is left as it was).
fn arithmetic<'b, 'v>(
    function: &str,
    result: Result<Quantity, resource_quantity::QuantityError>,
) -> Returns<'b, 'v> {
    match result {
        Ok(q) => Ok(CowVal::owned(QuantityVal(q))),
        Err(err) => Err(failure(function, err)),
    }
}

fn add<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [a, b] = take(args)?;
    arithmetic("add", quantity("add", &a)?.add(quantity("add", &b)?))
}

fn add_int<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [a, b] = take(args)?;
    let operand = Quantity::from_int(int_arg("add", b.as_ref())?);
    arithmetic("add", quantity("add", &a)?.add(&operand))
}

fn sub<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [a, b] = take(args)?;
    arithmetic("sub", quantity("sub", &a)?.sub(quantity("sub", &b)?))
}

fn sub_int<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [a, b] = take(args)?;
    let operand = Quantity::from_int(int_arg("sub", b.as_ref())?);
    arithmetic("sub", quantity("sub", &a)?.sub(&operand))
}

#[cfg(test)]
mod tests {
    use cel::Value;

    use super::super::library::eval;

    #[test]
    fn the_quantity_library_behaves_as_kubes() {
        let t = |v: bool| Ok(Value::Bool(v));
        let cases: Vec<(&str, Result<Value, String>)> = vec![
            (r#"isQuantity("20") && isQuantity("20M") && isQuantity("20Mi")"#, t(true)),
            (r#"isQuantity("20Mo") || isQuantity("10Mm") || isQuantity("200K")"#, t(false)),
            (r#"quantity("200M") == quantity("200M")"#, t(true)),
            (r#"quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")"#, t(true)),
            (r#"quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M")"#, t(true)),
            (r#"quantity("200M") == quantity("0.3G")"#, t(false)),
            (r#"quantity("50M").isLessThan(quantity("50Mi"))"#, t(true)),
            (r#"quantity("100M").isLessThan(quantity("50M"))"#, t(false)),
            (r#"quantity("50Mi").isGreaterThan(quantity("50M"))"#, t(true)),
            (r#"quantity("50M").isGreaterThan(quantity("100M"))"#, t(false)),
            (r#"quantity("200M").compareTo(quantity("0.2G"))"#, Ok(Value::Int(0))),
            (r#"quantity("50M").compareTo(quantity("50Mi"))"#, Ok(Value::Int(-1))),
            (r#"quantity("50Mi").compareTo(quantity("50M"))"#, Ok(Value::Int(1))),
            (r#"quantity("50k").add(quantity("20")) == quantity("50.02k")"#, t(true)),
            (r#"quantity("50k").add(20).isLessThan(quantity("50020"))"#, t(false)),
            (r#"quantity("50k").sub(quantity("20")) == quantity("49.98k")"#, t(true)),
            (r#"quantity("50k").sub(20) == quantity("49980")"#, t(true)),
            (r#"quantity("50k").add(20).sub(quantity("100k")).asInteger()"#, Ok(Value::Int(-49980))),
            (r#"quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()"#, Ok(Value::Int(20))),
            (r#"quantity("50k").asInteger()"#, Ok(Value::Int(50000))),
            (r#"quantity("9999999999999999999999999999999999999G").isInteger()"#, t(false)),
            (r#"quantity("50").isInteger()"#, t(true)),
            (r#"quantity("50.703k").asApproximateFloat()"#, Ok(Value::Float(50703.0))),
            (r#"sign(quantity("-5")) == -1 && sign(quantity("0")) == 0 && sign(quantity("1Ki")) == 1"#, t(true)),
            (r#"type(quantity("1")) == type(quantity("2"))"#, t(true)),
            (
                r#"quantity("10Mo")"#,
                Err("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into()),
            ),
            (r#"quantity("10Mm")"#, Err("unable to parse quantity's suffix".into())),
            (
                r#"quantity("9999999999999999999999999999999999999G").asInteger()"#,
                Err("cannot convert value to integer".into()),
            ),
            (r#"isQuantity(1)"#, Err("no such overload".into())),
        ];
        for (expr, want) in cases {
            // Quantities have no plain value to return: compare their results instead.
            assert_eq!(eval(expr), want, "{expr}");
        }
    }
}
