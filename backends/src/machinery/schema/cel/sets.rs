//! cel-go's sets extension (`ext.Sets()`, in kube's base environment since 1.29):
//! `sets.contains(a, b)` (every element of `b` is in `a`), `sets.equivalent(a, b)` (each
//! contains the other) and `sets.intersects(a, b)` (an element in common), with CEL's
//! equality (`1`, `1u` and `1.0` are one element).

use cel::common::types::LIST_TYPE;
use cel::common::value::Val;
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{bool_val, no_such_overload, take, Args, Returns};

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let lists = || vec![LIST_TYPE, LIST_TYPE];
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        lists(),
        contains,
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        lists(),
        equivalent,
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        lists(),
        intersects,
    )?;
    Ok(())
}

/// Whether `list` has an element equal to `item`.
fn has(function: &str, list: &dyn Val, item: &dyn Val) -> Result<bool, ExecutionError> {
    list.as_container()
        .ok_or_else(|| no_such_overload(function, &[list]))?
        .contains(item)
}

/// Whether `predicate` holds for every (`all`) or some element of `list`.
fn any_or_all(
    function: &str,
    list: &dyn Val,
    all: bool,
    mut predicate: impl FnMut(&dyn Val) -> Result<bool, ExecutionError>,
) -> Result<bool, ExecutionError> {
    let mut items = list
        .as_iterable()
        .ok_or_else(|| no_such_overload(function, &[list]))?
        .iter();
    while let Some(item) = items.next() {
        if predicate(item)? != all {
            return Ok(!all);
        }
    }
    Ok(all)
}

fn contains_all(function: &str, a: &dyn Val, b: &dyn Val) -> Result<bool, ExecutionError> {
    any_or_all(function, b, true, |item| has(function, a, item))
}

fn contains<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [a, b] = take(args)?;
    bool_val(contains_all("sets.contains", a.as_ref(), b.as_ref())?)
}

fn equivalent<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [a, b] = take(args)?;
    let (a, b) = (a.as_ref(), b.as_ref());
    bool_val(contains_all("sets.equivalent", a, b)? && contains_all("sets.equivalent", b, a)?)
}

fn intersects<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [a, b] = take(args)?;
    let (a, b) = (a.as_ref(), b.as_ref());
    bool_val(any_or_all("sets.intersects", b, false, |item| {
        has("sets.intersects", a, item)
    })?)
}

#[cfg(test)]
mod tests {
    use cel::Value;

    use super::super::library::eval;

    #[test]
    fn the_sets_extension_behaves_as_cel_gos() {
        for (expr, want) in [
            ("sets.contains([], [])", true),
            ("sets.contains([1, 2, 3], [])", true),
            ("sets.contains([1, 2, 3], [3, 1])", true),
            ("sets.contains([1, 2, 3], [4])", false),
            ("sets.contains([1], [1.0, 1u])", true),
            ("sets.contains([[1], [2]], [[2]])", true),
            ("sets.equivalent([1, 2, 2], [2, 1])", true),
            ("sets.equivalent([1, 2], [1])", false),
            ("sets.equivalent([], [])", true),
            ("sets.intersects([1, 2], [2, 3])", true),
            ("sets.intersects([1, 2], [3])", false),
            ("sets.intersects([], [1])", false),
            ("sets.intersects(['a'], ['a'])", true),
        ] {
            assert_eq!(eval(expr), Ok(Value::Bool(want)), "{expr}");
        }
    }
}
