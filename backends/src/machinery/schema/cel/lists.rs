//! kube's CEL lists library (`library/lists.go`, distinct from cel-go's `ext.Lists`):
//! `isSorted`, `sum`, `min`, `max`, `indexOf` and `lastIndexOf` on lists. kube declares one
//! overload per element type and lets its checker pick; with no checker, these take any list
//! and use the elements' own comparison, addition and equality. `sum()` of an empty list is
//! `0`, the int zero (kube's would be the zero of the statically known element type).

use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

use super::library::{bool_val, failure, int_val, no_such_overload, take, Args, Returns};

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "isSorted",
        "list_is_sorted_bool",
        LIST_TYPE,
        vec![],
        is_sorted,
    )?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_a_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_a_last_index_of_int",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}

/// The elements of a list, borrowed.
fn elements<'b, 'v>(
    function: &str,
    list: &'b (dyn Val + 'v),
) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let iterable = list
        .as_iterable()
        .ok_or_else(|| no_such_overload(function, &[list]))?;
    let mut items = iterable.iter();
    let mut out = Vec::new();
    while let Some(item) = items.next() {
        out.push(item);
    }
    Ok(out)
}

/// `a` compared with `b`, or no such overload when `a` has no order.
fn compare(function: &str, a: &dyn Val, b: &dyn Val) -> Result<std::cmp::Ordering, ExecutionError> {
    a.as_comparer()
        .ok_or_else(|| no_such_overload(function, &[a]))?
        .compare(b)
        .map_err(|_| no_such_overload(function, &[a, b]))
}

/// Whether no element is greater than the one after it.
fn is_sorted<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [list] = take(args)?;
    let items = elements("isSorted", list.as_ref())?;
    for pair in items.windows(2) {
        if compare("isSorted", pair[0], pair[1])?.is_gt() {
            return bool_val(false);
        }
    }
    // kube checks each element is comparable, the last one too.
    if let Some(last) = items.last() {
        if last.as_comparer().is_none() {
            return Err(no_such_overload("isSorted", &[*last]));
        }
    }
    bool_val(true)
}

/// The elements added up (`integer overflow` as `+` reports it).
fn sum<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [list] = take(args)?;
    let items = elements("sum", list.as_ref())?;
    let Some((first, rest)) = items.split_first() else {
        return int_val(0);
    };
    let mut total: Box<dyn Val + 'v> = first.clone_as_boxed();
    for item in rest {
        let adder = total
            .as_adder()
            .ok_or_else(|| no_such_overload("sum", &[total.as_ref()]))?;
        let next = adder.add(*item)?.into_owned();
        total = next;
    }
    Ok(CowVal::Owned(total))
}

/// The element `keep` prefers, the first of equals (`min` keeps the smaller).
fn extreme<'b, 'v>(
    function: &str,
    list: &CowVal<'b, 'v>,
    replace_when: std::cmp::Ordering,
) -> Returns<'b, 'v> {
    let items = elements(function, list.as_ref())?;
    let mut best: Option<&(dyn Val + 'v)> = None;
    for item in items {
        best = Some(match best {
            None => {
                if item.as_comparer().is_none() {
                    return Err(no_such_overload(function, &[item]));
                }
                item
            }
            Some(current) if compare(function, current, item)? == replace_when => item,
            Some(current) => current,
        });
    }
    match best {
        Some(value) => Ok(CowVal::Owned(value.clone_as_boxed())),
        None => Err(failure(
            function,
            format!("{function} called on empty list"),
        )),
    }
}

fn min<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [list] = take(args)?;
    extreme("min", &list, std::cmp::Ordering::Greater)
}

fn max<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [list] = take(args)?;
    extreme("max", &list, std::cmp::Ordering::Less)
}

fn index_of<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [list, item] = take(args)?;
    let items = elements("indexOf", list.as_ref())?;
    let found = items.iter().position(|e| e.equals(item.as_ref()));
    int_val(found.map_or(-1, |i| i as i64))
}

fn last_index_of<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [list, item] = take(args)?;
    let items = elements("lastIndexOf", list.as_ref())?;
    let found = items.iter().rposition(|e| e.equals(item.as_ref()));
    int_val(found.map_or(-1, |i| i as i64))
}

#[cfg(test)]
mod tests {
    use cel::Value;

    use super::super::library::eval;

    #[test]
    fn the_lists_library_behaves_as_kubes() {
        let t = |v: bool| Ok(Value::Bool(v));
        let cases: Vec<(&str, Result<Value, String>)> = vec![
            (
                "[1, 2, 3].isSorted() && [1, 1, 2].isSorted() && [].isSorted()",
                t(true),
            ),
            ("[3, 1].isSorted() || ['b', 'a'].isSorted()", t(false)),
            ("[1, 2, 3].sum()", Ok(Value::Int(6))),
            ("[1.5, 2.5].sum()", Ok(Value::Float(4.0))),
            ("[].sum()", Ok(Value::Int(0))),
            (
                "[9223372036854775807, 1].sum()",
                Err("integer overflow".into()),
            ),
            ("[3, 1, 2].min()", Ok(Value::Int(1))),
            ("[3, 1, 2].max()", Ok(Value::Int(3))),
            ("['b', 'a', 'c'].min()", Ok(Value::from("a"))),
            ("[].min()", Err("min called on empty list".into())),
            ("[].max()", Err("max called on empty list".into())),
            ("[1, 2, 1].indexOf(1)", Ok(Value::Int(0))),
            ("[1, 2, 1].lastIndexOf(1)", Ok(Value::Int(2))),
            (
                "[1, 2].indexOf(3) == -1 && [1, 2].lastIndexOf(3) == -1",
                t(true),
            ),
            ("['a', 'b'].indexOf('b')", Ok(Value::Int(1))),
            (
                "'abcb'.indexOf('b') == 1 && 'abcb'.lastIndexOf('b') == 3",
                t(true),
            ),
            ("[{}, {}].min()", Err("no such overload".into())),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(expr), want, "{expr}");
        }
    }
}
