//! kube's CEL regex library (`library/regex.go`): `string.find(regex)`, the first match or
//! `""`, and `string.findAll(regex)` / `string.findAll(regex, limit)`, the matches (at most
//! `limit` of them when it is not negative). Patterns are RE2 syntax, which the `regex` crate
//! shares; compiled patterns are kept in a process-wide table, as kube compiles a literal
//! pattern once per program.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cel::common::types::{CelList, CelString, INT_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env};
use regex::Regex;

use super::library::{failure, int_arg, string_arg, string_val, take, Args, Returns};

/// Patterns kept compiled before the table is emptied.
const CACHE_LIMIT: usize = 1024;
/// Compiled programs larger than this are refused, as RE2 refuses very large ones.
const SIZE_LIMIT: usize = 1 << 20;

pub(super) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "find",
        "string_find_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_limited,
    )?;
    Ok(())
}

/// `pattern` compiled, from the table when it was compiled before; the error is worded as
/// Go's `regexp` words its own (`error parsing regexp: ...`), with the `regex` crate's
/// explanation.
pub(super) fn compiled(pattern: &str) -> Result<Arc<Regex>, String> {
    type Table = Mutex<HashMap<String, Arc<Regex>>>;
    static TABLE: OnceLock<Table> = OnceLock::new();
    let table = TABLE.get_or_init(Table::default);
    if let Some(found) = table.lock().ok().and_then(|t| t.get(pattern).cloned()) {
        return Ok(found);
    }
    let regex = regex::RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .build()
        .map_err(|err| format!("error parsing regexp: {}: `{pattern}`", explain(&err)))?;
    let regex = Arc::new(regex);
    if let Ok(mut t) = table.lock() {
        if t.len() >= CACHE_LIMIT {
            t.clear();
        }
        t.insert(pattern.to_string(), Arc::clone(&regex));
    }
    Ok(regex)
}

/// The last line of a `regex` error (its explanation, without the pattern it quotes).
fn explain(err: &regex::Error) -> String {
    let text = err.to_string();
    let last = text.lines().last().unwrap_or_default().trim();
    last.strip_prefix("error: ").unwrap_or(last).to_string()
}

fn pattern(function: &str, text: &(dyn Val + '_)) -> Result<Arc<Regex>, cel::ExecutionError> {
    compiled(string_arg(function, text)?)
        .map_err(|err| failure(function, format!("Illegal regex: {err}")))
}

fn find<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text, regex] = take(args)?;
    let regex = pattern("find", regex.as_ref())?;
    let found = regex
        .find(string_arg("find", text.as_ref())?)
        .map_or("", |m| m.as_str());
    string_val(found.to_string())
}

fn find_all<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text, regex] = take(args)?;
    matches(text.as_ref(), regex.as_ref(), -1)
}

fn find_all_limited<'b, 'v>(args: Args<'b, 'v>) -> Returns<'b, 'v> {
    let [text, regex, limit] = take(args)?;
    matches(
        text.as_ref(),
        regex.as_ref(),
        int_arg("findAll", limit.as_ref())?,
    )
}

/// Go's `FindAllString(s, n)`: every match when `n` is negative, else at most `n`.
fn matches<'b, 'v>(text: &(dyn Val + '_), regex: &(dyn Val + '_), limit: i64) -> Returns<'b, 'v> {
    let regex = pattern("findAll", regex)?;
    let text = string_arg("findAll", text)?;
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let found: Vec<Box<dyn Val + 'v>> = regex
        .find_iter(text)
        .take(limit)
        .map(|m| Box::new(CelString::from(m.as_str().to_string())) as Box<dyn Val + 'v>)
        .collect();
    Ok(CowVal::owned(CelList::from(found)))
}

#[cfg(test)]
mod tests {
    use cel::Value;

    use super::super::library::eval;

    #[test]
    fn the_regex_library_behaves_as_kubes() {
        let list = |items: &[&str]| {
            Ok(Value::List(std::sync::Arc::new(
                items.iter().map(|s| Value::from(*s)).collect(),
            )))
        };
        let cases: Vec<(&str, Result<Value, String>)> = vec![
            ("'abc 123'.find('[0-9]+')", Ok(Value::from("123"))),
            ("'abc'.find('[0-9]+')", Ok(Value::from(""))),
            ("'123 abc 456'.findAll('[0-9]+')", list(&["123", "456"])),
            ("'123 abc 456'.findAll('[0-9]+', 1)", list(&["123"])),
            ("'123 abc 456'.findAll('[0-9]+', 0)", list(&[])),
            ("'123 abc 456'.findAll('[0-9]+', -1)", list(&["123", "456"])),
            ("'abc'.findAll('x*')", list(&["", "", "", ""])),
            ("'axxb'.findAll('x*')", list(&["", "xx", ""])),
            (
                "'abc'.find('[')",
                Err("Illegal regex: error parsing regexp: unclosed character class: `[`".into()),
            ),
        ];
        for (expr, want) in cases {
            assert_eq!(eval(expr), want, "{expr}");
        }
    }
}
