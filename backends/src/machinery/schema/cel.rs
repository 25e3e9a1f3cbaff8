//! CEL validation rules (`x-kubernetes-validations`) on custom resources, as
//! apiextensions-apiserver's `schema/cel` package evaluates them: [`validate_cel`] walks the
//! object along its schema and, at every node with rules, evaluates each rule with `self` bound
//! to the value there (and `oldSelf` to the old object's value at the same path on update:
//! transition rules run only when that old value exists), turning a `false` into a field error
//! with the rule's `message`/`messageExpression`, `reason` and `fieldPath`.
//! [`compile_errors`] is the CRD-time check that every rule compiles.
//!
//! The evaluator is the `cel` crate (cel-rust) with its standard library and its `strings`,
//! `lists` and `math` extensions, plus the Kubernetes libraries kube-apiserver 1.32 gives CRD
//! rules, each in a submodule: [`quantity`] (over a port of `resource.Quantity`), [`urls`]
//! (over a port of Go's `net/url`), [`ip`] and [`cidr`] (over a port of `net/netip`),
//! [`regexp`] (`find`, `findAll`), kube's [`lists`] (`isSorted`, `sum`, `min`, `max`,
//! `indexOf`, `lastIndexOf`), [`format`] (`format.dns1123Label()`, ..., `.validate(s)`) and
//! cel-go's [`sets`]. kube's `Quantity`, `URL`, `IP`, `CIDR` and `NamedFormat` objects are
//! opaque values of those CEL type names ([`library`]). Everything is registered once on the
//! shared environment.
//!
//! There is no type checker, so compilation checks what can be checked without one (syntax,
//! undeclared identifiers, fields the schema does not declare, rules that cannot be a bool,
//! literal `find`/`findAll` patterns that are no regex) and everything else surfaces when a
//! rule runs, as kube's runtime errors do. Programs are compiled once per rule text and kept
//! in a process-wide table, not per request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine;
use cel::common::ast::{Expr, IdedExpr, LiteralValue};
use cel::common::types::{
    CelBool, CelBytes, CelDouble, CelDuration, CelInt, CelList, CelMap, CelMapKey, CelNull,
    CelOptional, CelString, CelTimestamp, CelUInt,
};
use cel::common::value::Val;
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Program};
use serde_json::Value;

use super::structural::Schema;
use super::{child, index, key, ratcheting};
use crate::status::StatusCause;

mod cidr;
mod cost;
mod durations;
mod format;
mod ip;
mod library;
mod lists;
mod metering;
mod net_url;
pub(crate) mod netip;
mod quantity;
mod regexp;
mod resource_quantity;
mod sets;
mod urls;

/// `ScopedVarName` and `OldScopedVarName`.
const SELF: &str = "self";
const OLD_SELF: &str = "oldSelf";
/// `celconfig.MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_EXPRESSION_BYTES: usize = 5 * 1024;
/// Rules kept compiled before the table is emptied (rules only change with CRDs).
const CACHE_LIMIT: usize = 8192;

/// Identifiers CEL declares besides variables: type names (`type(x) == int`) and the
/// namespaces of namespaced functions (`optional.none()`, `math.greatest(..)`).
const DECLARED: &[&str] = &[
    "bool",
    "bytes",
    "double",
    "duration",
    "dyn",
    "int",
    "list",
    "map",
    "null_type",
    "string",
    "timestamp",
    "type",
    "uint",
    "optional",
    "math",
    "strings",
    "lists",
    "base64",
];

/// `celReservedSymbols`: property names that are escaped as `__name__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// A compiled expression, or kube's detail for why it does not compile.
struct Compiled {
    program: Result<Program, String>,
    /// The program's expression with its comprehensions metered, for running it.
    metered: Option<metering::Metered>,
    uses_old_self: bool,
}

/// The environment rules run in: CEL's standard library and macros, the `strings`, `lists`
/// and `math` extensions, and kube's libraries ([`library::register`]).
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // The extensions register distinct names on a fresh environment; a failure would only
        // leave their functions undeclared.
        let _ = env.add_extension(cel::extensions::strings);
        let _ = env.add_extension(cel::extensions::lists);
        let _ = env.add_extension(cel::extensions::math);
        // The same holds for kube's libraries (a unit test registers them on a fresh
        // environment), but say so if it ever fails.
        if let Err(err) = library::register(&mut env).and_then(|()| metering::register(&mut env)) {
            tracing::error!(error = %err, "kube's CEL libraries could not all be registered");
        }
        Arc::new(env)
    })
}

/// What a compiled expression must produce, for the checks a type checker would make.
#[derive(Clone, Copy, PartialEq)]
enum Output {
    Bool,
    String,
}

/// The program for `source`, compiled once and shared.
fn compiled(source: &str, output: Output) -> Arc<Compiled> {
    type Table = Mutex<HashMap<(String, bool), Arc<Compiled>>>;
    static TABLE: OnceLock<Table> = OnceLock::new();
    let table = TABLE.get_or_init(Table::default);
    let cache_key = (source.to_string(), output == Output::Bool);
    if let Ok(map) = table.lock() {
        if let Some(found) = map.get(&cache_key) {
            return Arc::clone(found);
        }
    }
    let fresh = Arc::new(compile(source, None, output));
    if let Ok(mut map) = table.lock() {
        if map.len() >= CACHE_LIMIT {
            map.clear();
        }
        map.insert(cache_key, Arc::clone(&fresh));
    }
    fresh
}

/// Compiles `source`; with `schema`, field selections on `self`/`oldSelf` are checked against
/// it (the CRD-time check). Errors are kube's details: `compilation failed: ERROR: ...` or
/// `cel expression must evaluate to a bool`.
fn compile(source: &str, schema: Option<(&Schema, bool)>, output: Output) -> Compiled {
    let program = match env().compile(source) {
        Ok(p) => p,
        Err(errors) => {
            let rendered: Vec<String> = errors
                .errors
                .iter()
                .map(|e| display_error(source, e.pos.0, e.pos.1, &e.msg))
                .collect();
            return Compiled {
                program: Err(format!("compilation failed: {}", rendered.join("\n"))),
                metered: None,
                uses_old_self: false,
            };
        }
    };
    let mut check = Checker {
        program: &program,
        source,
        bound: Vec::new(),
        issues: Vec::new(),
        uses_old_self: false,
    };
    check.expr(program.expression());
    if let Some((s, is_root)) = schema {
        check.fields(program.expression(), s, is_root);
    }
    let uses_old_self = check.uses_old_self;
    if !check.issues.is_empty() {
        check.issues.sort();
        let rendered: Vec<String> = check.issues.into_iter().map(|(_, m)| m).collect();
        return Compiled {
            program: Err(format!("compilation failed: {}", rendered.join("\n"))),
            metered: None,
            uses_old_self,
        };
    }
    if let Some(kind) = static_kind(&program.expression().expr) {
        let wrong = match output {
            Output::Bool => (kind != "bool").then_some("cel expression must evaluate to a bool"),
            Output::String => (!matches!(kind, "string" | "sum"))
                .then_some("messageExpression must evaluate to a string"),
        };
        if let Some(detail) = wrong {
            return Compiled {
                program: Err(detail.to_string()),
                metered: None,
                uses_old_self,
            };
        }
    }
    // What kube's `env.Program` would refuse (literal regexes of `find`/`findAll`).
    if let Some(detail) = library::instantiation_error(program.expression()) {
        return Compiled {
            program: Err(detail),
            metered: None,
            uses_old_self,
        };
    }
    Compiled {
        metered: Some(metering::Metered::of(program.expression())),
        program: Ok(program),
        uses_old_self,
    }
}

/// cel-go's `Error.ToDisplayString`: `ERROR: <input>:1:5: msg` and the line with a caret.
fn display_error(source: &str, line: isize, column: isize, msg: &str) -> String {
    let mut out = format!("ERROR: <input>:{line}:{column}: {msg}");
    let snippet = usize::try_from(line - 1)
        .ok()
        .and_then(|l| source.lines().nth(l));
    if let Some(snippet) = snippet {
        let snippet = snippet.replace('\t', " ");
        out.push_str("\n | ");
        out.push_str(&snippet);
        out.push_str("\n | ");
        let dots = usize::try_from(column - 1).unwrap_or(0);
        for c in snippet.chars().take(dots) {
            out.push(if c.len_utf8() > 1 { '．' } else { '.' });
        }
        out.push('^');
    }
    out
}

/// The type an expression surely has, from its form alone (literals, operators), if known.
fn static_kind(expr: &Expr) -> Option<&'static str> {
    match expr {
        Expr::Literal(l) => Some(match l {
            LiteralValue::Boolean(_) => "bool",
            LiteralValue::String(_) => "string",
            LiteralValue::Int(_) => "int",
            LiteralValue::UInt(_) => "uint",
            LiteralValue::Double(_) => "double",
            LiteralValue::Bytes(_) => "bytes",
            LiteralValue::Null => "null_type",
        }),
        Expr::List(_) => Some("list"),
        Expr::Map(_) => Some("map"),
        Expr::Call(call) => match call.func_name.as_str() {
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" | "_&&_" | "_||_" | "!_" | "@in"
            | "startsWith" | "endsWith" | "contains" | "matches" | "has" => Some("bool"),
            "size" => Some("int"),
            "string" => Some("string"),
            "_-_" | "_*_" | "_/_" | "_%_" | "-_" => Some("number"),
            // `+` adds numbers or joins strings, lists and bytes: never a bool.
            "_+_" => Some("sum"),
            other => library::result_kind(other),
        },
        Expr::Comprehension(c) => match &c.result.expr {
            // `all`/`exists`/`exists_one` end in a bool accumulator or comparison; `map` and
            // `filter` in a list.
            Expr::Ident(name) if name == &c.accu_var => static_kind(&c.accu_init.expr),
            other => static_kind(other),
        },
        _ => None,
    }
}

/// Walks a parsed program for what cel-go's checker would refuse without types: identifiers
/// that are not declared, and (given the schema) fields `self` does not have.
struct Checker<'a> {
    program: &'a Program,
    source: &'a str,
    /// Comprehension variables in scope.
    bound: Vec<String>,
    /// (position, rendered error)
    issues: Vec<((isize, isize), String)>,
    uses_old_self: bool,
}

impl Checker<'_> {
    fn position(&self, id: u64) -> (isize, isize) {
        let Some((start, _)) = self.program.source_info().offset_for(id) else {
            return (1, 1);
        };
        let start = start as usize;
        let mut line = 1;
        let mut line_start = 0;
        for (i, c) in self.source.char_indices() {
            if i >= start {
                break;
            }
            if c == '\n' {
                line += 1;
                line_start = i + 1;
            }
        }
        let column = self
            .source
            .get(line_start..start)
            .map_or(0, |s| s.chars().count());
        (line, column as isize + 1)
    }

    fn issue(&mut self, id: u64, msg: String) {
        let (line, column) = self.position(id);
        let rendered = display_error(self.source, line, column, &msg);
        self.issues.push(((line, column), rendered));
    }

    fn expr(&mut self, e: &IdedExpr) {
        match &e.expr {
            Expr::Ident(name) => {
                if name == OLD_SELF && !self.bound.contains(name) {
                    self.uses_old_self = true;
                } else if name != SELF
                    && !self.bound.contains(name)
                    && !DECLARED.contains(&name.as_str())
                {
                    self.issue(
                        e.id,
                        format!("undeclared reference to '{name}' (in container '')"),
                    );
                }
            }
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    // `format.named(..)`: the namespace of a library function, no identifier.
                    let namespace = match &target.expr {
                        Expr::Ident(name) if !self.bound.contains(name) => Some(name.as_str()),
                        _ => None,
                    };
                    if !namespace
                        .is_some_and(|ns| library::is_namespaced_function(ns, &call.func_name))
                    {
                        self.expr(target);
                    }
                }
                for a in &call.args {
                    self.expr(a);
                }
            }
            // `net.IP` and `net.CIDR` name types.
            Expr::Select(sel)
                if matches!(&sel.operand.expr, Expr::Ident(ns)
                    if !self.bound.contains(ns) && library::is_type_name(ns, &sel.field)) => {}
            Expr::Comprehension(c) => {
                self.expr(&c.iter_range);
                self.expr(&c.accu_init);
                let scope = self.bound.len();
                self.bound.push(c.iter_var.clone());
                if let Some(v) = &c.iter_var2 {
                    self.bound.push(v.clone());
                }
                self.bound.push(c.accu_var.clone());
                self.expr(&c.loop_cond);
                self.expr(&c.loop_step);
                self.expr(&c.result);
                self.bound.truncate(scope);
            }
            Expr::List(list) => {
                for el in &list.elements {
                    self.expr(el);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                        self.expr(&m.key);
                        self.expr(&m.value);
                    }
                }
            }
            Expr::Struct(st) => {
                for entry in &st.entries {
                    if let cel::common::ast::EntryExpr::StructField(f) = &entry.expr {
                        self.expr(&f.value);
                    }
                }
            }
            Expr::Select(sel) => self.expr(&sel.operand),
            Expr::Literal(_) | Expr::Unspecified => {}
        }
    }

    /// Reports selections of fields the schema of `self` does not declare, the way cel-go's
    /// checker does with the schema's declared types (`undefined field 'x'`).
    fn fields(&mut self, e: &IdedExpr, s: &Schema, is_root: bool) {
        if let Expr::Select(sel) = &e.expr {
            if let Some((parent, parent_root)) = self.resolve(&sel.operand, s, is_root) {
                if field_schema(parent, parent_root, &sel.field).is_none() && closed(parent) {
                    self.issue(e.id, format!("undefined field '{}'", sel.field));
                }
            }
        }
        let mut visit = |c: &IdedExpr| self.fields(c, s, is_root);
        match &e.expr {
            Expr::Select(sel) => visit(&sel.operand),
            Expr::Call(call) => {
                if let Some(t) = &call.target {
                    visit(t);
                }
                for a in &call.args {
                    visit(a);
                }
            }
            Expr::Comprehension(c) => {
                for part in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    visit(part);
                }
            }
            Expr::List(list) => list.elements.iter().for_each(visit),
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(m) = &entry.expr {
                        visit(&m.key);
                        visit(&m.value);
                    }
                }
            }
            _ => {}
        }
    }

    /// The schema node a `self.a.b` chain denotes.
    /// The schema node a `self.a.b` chain denotes, and whether it is a resource root (where
    /// `metadata` is narrowed).
    fn resolve<'s>(
        &self,
        e: &IdedExpr,
        s: &'s Schema,
        is_root: bool,
    ) -> Option<(&'s Schema, bool)> {
        match &e.expr {
            Expr::Ident(name)
                if (name == SELF || name == OLD_SELF) && !self.bound.contains(name) =>
            {
                Some((s, is_root))
            }
            Expr::Select(sel) if !sel.test => {
                let (parent, parent_root) = self.resolve(&sel.operand, s, is_root)?;
                field_schema(parent, parent_root, &sel.field)
            }
            _ => None,
        }
    }
}

/// Whether an object schema declares all its fields (so others are undefined in CEL).
fn closed(s: &Schema) -> bool {
    // kube's `SchemaDeclType` ignores `x-kubernetes-preserve-unknown-fields` ("we don't support
    // validation rules on data that we don't have schema information for"): an object's CEL
    // type has its declared properties only (an embedded resource's plus apiVersion, kind and
    // metadata), whatever else it keeps.
    s.type_ == "object" && s.additional_properties.is_none()
}

/// The schema of the CEL field `name` (escaped) of an object node, as kube's DeclType has it:
/// at a resource root `metadata` only has `name` and `generateName`.
fn field_schema<'s>(s: &'s Schema, is_root: bool, name: &str) -> Option<(&'s Schema, bool)> {
    if let Some(ap) = s.additional_properties_schema() {
        return Some((ap, ap.x_embedded_resource));
    }
    if is_root {
        match name {
            "metadata" => return Some((root_metadata_schema(), false)),
            "apiVersion" | "kind" => return Some((string_schema(), false)),
            _ => {}
        }
    }
    let (_, sub) = s
        .properties
        .iter()
        .find(|(k, _)| escape(k).as_deref() == Some(name))?;
    Some((sub, sub.x_embedded_resource))
}

/// `metadata` of a resource root as kube's `WithTypeAndObjectMeta` types it.
fn root_metadata_schema() -> &'static Schema {
    static META: OnceLock<Schema> = OnceLock::new();
    META.get_or_init(|| {
        Schema::from_json(&serde_json::json!({"type": "object", "properties": {
            "name": {"type": "string"}, "generateName": {"type": "string"}}}))
    })
}

fn string_schema() -> &'static Schema {
    static STRING: OnceLock<Schema> = OnceLock::new();
    STRING.get_or_init(|| Schema::from_json(&serde_json::json!({"type": "string"})))
}

/// [`escape`], borrowing the name when it is spelled the same in CEL (most are).
fn escape_cow(name: &str) -> Option<std::borrow::Cow<'_, str>> {
    let plain = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && !RESERVED.contains(&name)
        && !name.contains("__")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if plain {
        Some(std::borrow::Cow::Borrowed(name))
    } else {
        escape(name).map(std::borrow::Cow::Owned)
    }
}

/// kube's `cel.Escape`: how a property name is spelled in CEL, or `None` when it cannot be.
fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            out.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' => out.push(c),
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

/// One `x-kubernetes-validations` entry.
struct Rule<'a> {
    rule: &'a str,
    message: &'a str,
    message_expression: &'a str,
    reason: Option<&'a str>,
    field_path: &'a str,
}

impl<'a> Rule<'a> {
    fn of(value: &'a Value) -> Rule<'a> {
        let text = |k: &str| value.get(k).and_then(Value::as_str).unwrap_or_default();
        Rule {
            rule: text("rule"),
            message: text("message"),
            message_expression: text("messageExpression"),
            reason: value.get("reason").and_then(Value::as_str),
            field_path: text("fieldPath"),
        }
    }

    /// `ruleErrorString`.
    fn error_string(&self) -> &str {
        match self.message.trim() {
            "" => self.rule.trim(),
            m => m,
        }
    }

    /// `ruleMessageOrDefault`.
    fn message_or_default(&self) -> String {
        match self.message.trim() {
            "" => format!("failed rule: {}", self.rule.trim()),
            m => m.to_string(),
        }
    }
}

/// The CRD-time check of one rule (kube compiles every rule when a CRD is written): errors for
/// `<rule_path>.rule` and `<rule_path>.messageExpression` when they do not compile, with the
/// rule printed as kube prints its internal `ValidationRule`. `schema` is the node the rule is
/// on, `is_root` whether it is a resource root (the schema's root or an embedded resource).
///
/// `uncorrelatable` is the path of the highest schema node above this one whose old and new
/// values cannot be paired (the items of a list that is not a map list), where a rule may not
/// read `oldSelf`.
pub fn compile_errors(
    rule_path: &str,
    rule: &Value,
    schema: &Schema,
    is_root: bool,
    uncorrelatable: Option<&str>,
) -> Vec<StatusCause> {
    let r = Rule::of(rule);
    let mut out = Vec::new();
    if r.rule.trim().is_empty() {
        return out;
    }
    let compiled = compile(r.rule, Some((schema, is_root)), Output::Bool);
    let program = match &compiled.program {
        Ok(program) => program,
        Err(detail) => {
            out.push(invalid_rule(&format!("{rule_path}.rule"), rule, detail));
            return out;
        }
    };
    // kube refuses a rule whose estimated cost exceeds its budget; kubegate refuses those
    // that exceed it more than a hundredfold (see `cel/cost.rs`).
    if cost::far_over_budget(program.expression(), schema, is_root) {
        out.push(crate::status::field_forbidden(
            &format!("{rule_path}.rule"),
            cost::OVER_BUDGET,
        ));
    }
    if !r.message_expression.trim().is_empty() {
        let message = compile(
            r.message_expression,
            Some((schema, is_root)),
            Output::String,
        );
        if let Err(detail) = message.program {
            let detail = match detail.strip_prefix("compilation failed: ") {
                Some(rest) => format!("messageExpression compilation failed: {rest}"),
                None => detail,
            };
            out.push(invalid_rule(
                &format!("{rule_path}.messageExpression"),
                rule,
                &detail,
            ));
        }
    }
    // kube: `oldSelf` only where old and new values correlate; `optionalOldSelf` (true or
    // false) only on a rule that reads `oldSelf`.
    if compiled.uses_old_self {
        if let Some(within) = uncorrelatable {
            out.push(StatusCause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {}: oldSelf cannot be used on the uncorrelatable portion of the schema within {within}",
                    go_quote(r.rule)
                ),
                field: field_name(&format!("{rule_path}.rule")),
            });
        }
    } else if let Some(optional) = rule.get("optionalOldSelf").and_then(Value::as_bool) {
        out.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {optional}: may not be set if oldSelf is not used in rule"
            ),
            field: field_name(&format!("{rule_path}.optionalOldSelf")),
        });
    }
    out
}

/// `field.Invalid(path, schema.XValidations[i], detail)`: the value printed with `%#v`.
fn invalid_rule(field: &str, rule: &Value, detail: &str) -> StatusCause {
    let r = Rule::of(rule);
    let pointer = |set: bool, ty: &str| {
        if set {
            format!("(*{ty})(0xc000000000)")
        } else {
            format!("(*{ty})(nil)")
        }
    };
    let rendered = format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{}, FieldPath:{}, OptionalOldSelf:{}}}",
        go_quote(r.rule),
        go_quote(r.message),
        go_quote(r.message_expression),
        pointer(r.reason.is_some(), "apiextensions.FieldValueErrorReason"),
        go_quote(r.field_path),
        pointer(rule.get("optionalOldSelf").is_some_and(Value::is_boolean), "bool"),
    );
    StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {rendered}: {detail}"),
        field: field.into(),
    }
}

/// A string as Go's `%q` prints it.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Every `x-kubernetes-validations` rule of `schema` evaluated against `object` (with `old`,
/// the stored object, on update), as the custom resource strategy runs kube's
/// `cel.Validator.Validate` after schema validation: field paths from the object root (`<nil>`
/// for the root itself). `prior` are the schema validation's causes: when one of them is of a
/// kind kube calls blocking (`hasBlockingErr`), no rule runs and one cause says so. On update,
/// failures of rules without `oldSelf` on values equal to their old values are ratcheted
/// (dropped; kube turns them into warnings).
pub fn validate_cel(
    schema: &Schema,
    object: &Value,
    old: Option<&Value>,
    prior: &[StatusCause],
) -> Vec<StatusCause> {
    let mut out = Vec::new();
    if !has_rules(schema) {
        return out;
    }
    const BLOCKING: &[&str] = &[
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    ];
    if prior.iter().any(|c| BLOCKING.contains(&c.reason.as_str())) {
        out.push(StatusCause {
            reason: "FieldValueInvalid".into(),
            message: "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
            field: "<nil>".into(),
        });
        return out;
    }
    validate_cel_value(schema, object, old, true)
}

/// The rules of `schema` and below on `value` (old value `old`), `is_root` when the node is a
/// resource root (the schema's top or an embedded resource, where `metadata` is narrowed):
/// how a CRD's defaults are checked against their node's rules.
pub fn validate_cel_value(
    schema: &Schema,
    value: &Value,
    old: Option<&Value>,
    is_root: bool,
) -> Vec<StatusCause> {
    let node = Node {
        rules: schema,
        schema,
        path: String::new(),
        is_root,
    };
    let mut walker = Out {
        causes: Vec::new(),
        remaining_budget: metering::RUNTIME_BUDGET,
        exhausted: false,
    };
    let ratchet = Ratchet {
        old,
        parent_unchanged: false,
    };
    walk(&node, value, old, ratchet, &mut walker);
    walker.causes
}

/// What [`walk`] collects, and the cost budget left to the object's validation (kube's
/// `RuntimeCELCostBudget`): once it is spent, no further rule runs.
struct Out {
    causes: Vec<StatusCause>,
    remaining_budget: u64,
    exhausted: bool,
}

impl Out {
    /// Whether `s` or a node below it has rules (known from when the schema was read).
    fn has_rules(&mut self, s: &Schema) -> bool {
        s.rules_below
    }
}

/// Where [`walk`] is: the schema whose rules apply, the schema that types the value (they
/// differ under `allOf`), the field path, and whether the value is a resource root.
struct Node<'a> {
    rules: &'a Schema,
    schema: &'a Schema,
    path: String,
    is_root: bool,
}

fn has_rules(s: &Schema) -> bool {
    s.rules_below
}

/// Where ratcheting stands at a node (kube's `ratchetingOptions`): the old value this node
/// correlates with, if any, else whether the nearest correlated ancestor equals its old value.
/// It differs from `oldSelf`'s value under `allOf`, which kube does not correlate.
#[derive(Clone, Copy)]
struct Ratchet<'a> {
    old: Option<&'a Value>,
    parent_unchanged: bool,
}

/// `Validator.validate`: the rules at this node, then its `allOf`, then the items or fields
/// below, with `old` as `oldSelf`. A failed rule without `oldSelf` on a node that `ratchet`
/// finds unchanged is ratcheted.
fn walk(node: &Node<'_>, value: &Value, old: Option<&Value>, ratchet: Ratchet<'_>, out: &mut Out) {
    if value.is_null() || out.exhausted {
        return;
    }
    let old = old.filter(|o| !o.is_null());
    let unchanged = match ratchet.old {
        Some(o) => ratcheting::correlated_equal(node.schema, value, o),
        None => ratchet.parent_unchanged,
    };
    // Children correlate through this node, or are judged by the same ancestor.
    let below = |correlated| Ratchet {
        old: correlated,
        parent_unchanged: unchanged,
    };
    let (rules, schema) = (node.rules, node.schema);
    if !rules.x_validations.is_empty() {
        evaluate(node, value, old, unchanged, out);
    }
    for all_of in &rules.all_of {
        if out.has_rules(all_of) {
            let sub = Node {
                rules: all_of,
                schema,
                path: node.path.clone(),
                is_root: node.is_root,
            };
            // kube gives `allOf` the old value but no correlation of its own.
            let uncorrelated = Ratchet {
                old: None,
                parent_unchanged: ratchet.parent_unchanged,
            };
            walk(&sub, value, old, uncorrelated, out);
        }
    }
    match value {
        Value::Array(items) => {
            let (Some(rules_items), Some(node_items)) = (&rules.items, &schema.items) else {
                return;
            };
            if !out.has_rules(rules_items) {
                return;
            }
            // Each old list indexed by its items' keys once, not searched per item.
            let old_items = old
                .and_then(Value::as_array)
                .and_then(|o| ratcheting::MapList::new(schema, o));
            let ratchet_items = ratchet
                .old
                .and_then(Value::as_array)
                .and_then(|o| ratcheting::MapList::new(schema, o));
            for (i, item) in items.iter().enumerate() {
                let old_item = old_items.as_ref().and_then(|o| o.get(item));
                let ratchet_item = ratchet_items.as_ref().and_then(|o| o.get(item));
                let sub = Node {
                    rules: rules_items,
                    schema: node_items,
                    path: index(&node.path, i),
                    is_root: node_items.x_embedded_resource,
                };
                walk(&sub, item, old_item, below(ratchet_item), out);
            }
        }
        Value::Object(map) => {
            let correlatable = matches!(
                schema.x_map_type.as_deref(),
                None | Some("granular") | Some("atomic")
            );
            let old_map = old.and_then(Value::as_object).filter(|_| correlatable);
            let ratchet_map = ratchet.old.and_then(Value::as_object);
            // `apiVersion` and `kind` at the top never correlate (kube converts both objects
            // to one version, so their changes are not visible).
            let top = node.path.is_empty() && node.is_root;
            let field_ratchet = |k: &str| {
                if top && (k == "apiVersion" || k == "kind") {
                    Ratchet {
                        old: None,
                        parent_unchanged: false,
                    }
                } else {
                    below(ratchet_map.and_then(|o| o.get(k)))
                }
            };
            if let (Some(rules_ap), Some(node_ap)) = (
                rules.additional_properties_schema(),
                schema.additional_properties_schema(),
            ) {
                if out.has_rules(rules_ap) {
                    for (k, v) in map {
                        let sub = Node {
                            rules: rules_ap,
                            schema: node_ap,
                            path: key(&node.path, k),
                            is_root: node_ap.x_embedded_resource,
                        };
                        walk(
                            &sub,
                            v,
                            old_map.and_then(|o| o.get(k)),
                            field_ratchet(k),
                            out,
                        );
                    }
                }
            }
            for (k, v) in map {
                let (Some(rules_p), Some(node_p)) =
                    (rules.properties.get(k), schema.properties.get(k))
                else {
                    continue;
                };
                if !out.has_rules(rules_p) {
                    continue;
                }
                let sub = Node {
                    rules: rules_p,
                    schema: node_p,
                    path: child(&node.path, k),
                    is_root: node_p.x_embedded_resource,
                };
                walk(
                    &sub,
                    v,
                    old_map.and_then(|o| o.get(k)),
                    field_ratchet(k),
                    out,
                );
            }
        }
        _ => {}
    }
}

/// The field path of a cause (`field.Path.String()` of a nil path is `<nil>`).
fn field_name(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_string()
    } else {
        path.to_string()
    }
}

/// `validateExpressions` for the rules of one node.
fn evaluate(node: &Node<'_>, value: &Value, old: Option<&Value>, unchanged: bool, out: &mut Out) {
    let (rules, schema, path) = (node.rules, node.schema, node.path.as_str());
    let type_ = schema.type_.as_str();
    let invalid = |field: &str, detail: String| StatusCause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {detail}", go_quote(type_)),
        field: field_name(field),
    };
    let mut context = Context::with_env(Arc::clone(env()));
    context.add_variable_as_val(SELF, to_val(value, Some(schema), node.is_root));
    if let Some(old) = old {
        context.add_variable_as_val(OLD_SELF, to_val(old, Some(schema), node.is_root));
    }
    for raw in &rules.x_validations {
        if out.exhausted {
            return;
        }
        let rule = Rule::of(raw);
        if rule.rule.trim().is_empty() {
            continue;
        }
        let compiled = compiled(rule.rule, Output::Bool);
        let program = match &compiled.program {
            Ok(p) => p,
            Err(detail) => {
                out.causes
                    .push(invalid(path, format!("rule compile error: {detail}")));
                continue;
            }
        };
        // With `optionalOldSelf`, `oldSelf` is an optional: none on a create or a newly set
        // field (the rule runs), of the old value otherwise; without it a rule that reads
        // `oldSelf` runs only on updates of an existing value.
        let optional_old_self = compiled.uses_old_self
            && raw.get("optionalOldSelf").and_then(Value::as_bool) == Some(true);
        if compiled.uses_old_self && old.is_none() && !optional_old_self {
            continue;
        }
        let optional_context;
        let context_for_rule = if optional_old_self {
            let mut with_optional = Context::with_env(Arc::clone(env()));
            with_optional.add_variable_as_val(SELF, to_val(value, Some(schema), node.is_root));
            let old_self = match old {
                Some(old) => CelOptional::of(to_val(old, Some(schema), node.is_root)),
                None => CelOptional::none(),
            };
            with_optional.add_variable_as_val(OLD_SELF, Box::new(old_self));
            optional_context = with_optional;
            &optional_context
        } else {
            &context
        };
        let (result, cost) = match &compiled.metered {
            Some(metered) => metered.run(metering::PER_CALL_LIMIT, |expression| {
                cel::Value::resolve(expression, context_for_rule)
            }),
            None => (program.execute(context_for_rule), 0),
        };
        // kube charges every evaluation to the object's budget; past it, nothing more runs.
        if cost > out.remaining_budget {
            out.causes.push(invalid(
                path,
                "validation failed due to running out of cost budget, no further validation rules will be run".into(),
            ));
            out.exhausted = true;
            return;
        }
        out.remaining_budget -= cost;
        if cost > metering::PER_CALL_LIMIT {
            out.causes.push(invalid(
                path,
                format!(
                    "'{}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                    metering::LIMIT_EXCEEDED,
                    rule.error_string()
                ),
            ));
            out.exhausted = true;
            return;
        }
        let result = match result {
            Ok(v) => v,
            Err(err) => {
                out.causes.push(invalid(path, runtime_error(&err, &rule)));
                continue;
            }
        };
        match result {
            cel::Value::Bool(true) => continue,
            cel::Value::Bool(false) => {}
            _ => {
                out.causes.push(invalid(
                    path,
                    "rule compile error: cel expression must evaluate to a bool".into(),
                ));
                continue;
            }
        }
        let mut field = path.to_string();
        if !rule.field_path.is_empty() {
            if let Some(normalized) = normalize_field_path(rule.field_path, schema) {
                field = child(path, &normalized);
            }
        }
        // kube evaluates (and charges) the messageExpression whether or not the failure is
        // ratcheted; one that runs out of budget or past its limit ends the validation.
        let ratcheted = !compiled.uses_old_self && unchanged;
        let detail = match message_expression(&rule, context_for_rule, out.remaining_budget) {
            Message::Made(text, cost) => {
                out.remaining_budget -= cost;
                text
            }
            Message::Failed(cost) => {
                out.remaining_budget -= cost;
                rule.message_or_default()
            }
            Message::None => rule.message_or_default(),
            Message::Stop(detail) => {
                if !ratcheted {
                    out.causes.push(invalid(&field, detail));
                }
                out.exhausted = true;
                return;
            }
        };
        if ratcheted {
            continue;
        }
        out.causes.push(match rule.reason {
            Some("FieldValueForbidden") => StatusCause {
                reason: "FieldValueForbidden".into(),
                message: format!("Forbidden: {detail}"),
                field: field_name(&field),
            },
            Some("FieldValueRequired") => StatusCause {
                reason: "FieldValueRequired".into(),
                message: format!("Required value: {detail}"),
                field: field_name(&field),
            },
            Some("FieldValueDuplicate") => StatusCause {
                reason: "FieldValueDuplicate".into(),
                message: format!("Duplicate value: {}", go_quote(type_)),
                field: field_name(&field),
            },
            _ => invalid(&field, detail),
        });
    }
}

/// What a failing rule's `messageExpression` made (kube's `evalMessageExpression`).
enum Message {
    /// None to evaluate: the rule's `message`.
    None,
    /// The message, and what making it cost.
    Made(String, u64),
    /// It did not make a usable message (an error, not a string, empty, too long, several
    /// lines): the rule's `message`, and the cost, charged all the same.
    Failed(u64),
    /// It ran out of the object's budget or past its own limit: this error, and no further
    /// rule runs.
    Stop(String),
}

/// Evaluates a failing rule's `messageExpression` with `remaining_budget` left, metered as
/// rules are.
fn message_expression(
    rule: &Rule<'_>,
    context: &Context<'_, '_>,
    remaining_budget: u64,
) -> Message {
    if rule.message_expression.trim().is_empty() {
        return Message::None;
    }
    let compiled = compiled(rule.message_expression, Output::String);
    let Some(metered) = compiled.metered.as_ref() else {
        return Message::None;
    };
    let (result, cost) = metered.run(metering::PER_CALL_LIMIT, |expression| {
        cel::Value::resolve(expression, context)
    });
    if cost > remaining_budget {
        return Message::Stop(
            "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".into(),
        );
    }
    if cost > metering::PER_CALL_LIMIT {
        return Message::Stop(format!(
            "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
            go_quote(rule.message_expression)
        ));
    }
    let Ok(cel::Value::String(s)) = result else {
        return Message::Failed(cost);
    };
    let trimmed = s.trim();
    if trimmed.is_empty() || trimmed.len() > MAX_MESSAGE_EXPRESSION_BYTES || trimmed.contains('\n')
    {
        return Message::Failed(cost);
    }
    Message::Made(trimmed.to_string(), cost)
}

/// A runtime error as kube words it (cel-go's error texts, then kube's suffix).
fn runtime_error(err: &ExecutionError, rule: &Rule<'_>) -> String {
    let rule_text = rule.error_string();
    let text = match err {
        ExecutionError::NoSuchOverload(_)
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::UnsupportedTargetType { .. }
        | ExecutionError::NotSupportedAsMethod { .. } => {
            return format!("'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule_text}");
        }
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::UndeclaredReference(name) => {
            format!("undeclared reference to '{name}' (in container '')")
        }
        ExecutionError::DivisionByZero(_) => "division by zero".into(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
        ExecutionError::Overflow(..) => "integer overflow".into(),
        ExecutionError::IndexOutOfBounds(i) => match i {
            cel::Value::Int(i) => format!("index out of range: {i}"),
            cel::Value::UInt(i) => format!("index out of range: {i}"),
            other => format!("index out of range: {other:?}"),
        },
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    format!("{text} evaluating rule: {rule_text}")
}

/// Whether a rule's `fieldPath` names a field of `schema` (kube's `pathValid`).
pub fn field_path_valid(json_path: &str, schema: &Schema) -> bool {
    normalize_field_path(json_path, schema).is_some()
}

/// kube's `ValidFieldPath` (`.a.b['c.d']`) against the node's schema, as a field path
/// (`a.b[c.d]`), or `None` if it does not name a field.
fn normalize_field_path(json_path: &str, schema: &Schema) -> Option<String> {
    let mut out = String::new();
    let mut s = schema;
    let mut rest = json_path;
    while !rest.is_empty() {
        let name;
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            name = after[..end].to_string();
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            let mut end = None;
            let bytes = after.as_bytes();
            for i in 0..bytes.len() {
                if bytes[i] == b'\'' && (i == 0 || bytes[i - 1] != b'\\') {
                    end = Some(i);
                    break;
                }
            }
            let end = end?;
            name = after[..end].replace("\\'", "'").replace("\\\\", "\\");
            rest = after[end + 1..].strip_prefix(']')?;
        } else {
            return None;
        }
        if !s.properties.is_empty() {
            s = s.properties.get(&name)?;
            out = child(&out, &name);
        } else if let Some(ap) = s.additional_properties_schema() {
            s = ap;
            out = key(&out, &name);
        } else {
            return None;
        }
    }
    Some(out)
}

/// A string field's value as the CEL type its format gives it (kube's `SchemaDeclType`:
/// `byte` is bytes, `date-time` a timestamp, `duration` a duration); `None`: a plain string
/// (also when the text does not parse).
enum Typed {
    Bytes(Vec<u8>),
    Timestamp(chrono::DateTime<chrono::FixedOffset>),
    Duration(chrono::Duration),
}

fn typed_string(text: &str, schema: Option<&Schema>) -> Option<Typed> {
    let schema = schema.filter(|s| s.type_ == "string")?;
    match schema.format.as_str() {
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()
            .map(Typed::Bytes),
        "date-time" => chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(Typed::Timestamp),
        "duration" => durations::parse(text).map(Typed::Duration),
        _ => None,
    }
}

/// `UnstructuredToVal`: a JSON value as a CEL value typed by its schema (integers of `number`
/// fields are doubles, `byte` strings are bytes, property names escaped, a resource root's
/// `metadata` narrowed to `name` and `generateName`).
fn to_cel(value: &Value, schema: Option<&Schema>, is_root: bool) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => {
            let type_ = schema.map(|s| s.type_.as_str()).unwrap_or_default();
            if type_ == "number" {
                return cel::Value::Float(n.as_f64().unwrap_or(f64::NAN));
            }
            if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if type_ == "integer" && f.fract() == 0.0 && f.abs() < 9.2e18 {
                    cel::Value::Int(f as i64)
                } else {
                    cel::Value::Float(f)
                }
            }
        }
        Value::String(s) => match typed_string(s, schema) {
            Some(Typed::Bytes(bytes)) => cel::Value::Bytes(Arc::new(bytes)),
            Some(Typed::Timestamp(t)) => cel::Value::Timestamp(t),
            Some(Typed::Duration(d)) => cel::Value::Duration(d),
            None => cel::Value::String(Arc::new(s.clone())),
        },
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.items.as_deref());
            let embedded = item_schema.is_some_and(|s| s.x_embedded_resource);
            cel::Value::List(Arc::new(
                items
                    .iter()
                    .map(|v| to_cel(v, item_schema, embedded))
                    .collect(),
            ))
        }
        Value::Object(map) => {
            let mut out: HashMap<Key, cel::Value> = HashMap::with_capacity(map.len());
            match schema {
                Some(s) if s.additional_properties_schema().is_some() => {
                    let ap = s.additional_properties_schema();
                    let embedded = ap.is_some_and(|a| a.x_embedded_resource);
                    for (k, v) in map {
                        out.insert(Key::from(k.as_str()), to_cel(v, ap, embedded));
                    }
                }
                Some(s) if !s.properties.is_empty() || is_root => {
                    for (k, v) in map {
                        let Some(name) = escape(k) else { continue };
                        let sub = s.properties.get(k);
                        if is_root && k == "metadata" {
                            out.insert(Key::from(name), root_metadata(v));
                            continue;
                        }
                        if sub.is_none() && !s.preserves_unknown_fields() && !is_root {
                            continue;
                        }
                        let embedded = sub.is_some_and(|p| p.x_embedded_resource);
                        out.insert(Key::from(name), to_cel(v, sub, embedded));
                    }
                }
                _ => {
                    for (k, v) in map {
                        out.insert(Key::from(k.as_str()), to_cel(v, None, false));
                    }
                }
            }
            cel::Value::Map(Map { map: Arc::new(out) })
        }
    }
}

/// [`to_cel`] made directly as the interpreter's values, borrowing the strings of `value`:
/// what binding `to_cel`'s result to a context makes, without building (and copying) the
/// intermediate [`cel::Value`] tree on every evaluation.
fn to_val<'v>(value: &'v Value, schema: Option<&Schema>, is_root: bool) -> Box<dyn Val + 'v> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(_) => match to_cel(value, schema, is_root) {
            cel::Value::Float(f) => Box::new(CelDouble::from(f)),
            cel::Value::Int(i) => Box::new(CelInt::from(i)),
            cel::Value::UInt(u) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelNull),
        },
        Value::String(s) => match typed_string(s, schema) {
            Some(Typed::Bytes(bytes)) => Box::new(CelBytes::from(bytes)),
            Some(Typed::Timestamp(t)) => Box::new(CelTimestamp::from(t)),
            Some(Typed::Duration(d)) => Box::new(CelDuration::from(d)),
            None => Box::new(CelString::from(s.as_str())),
        },
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.items.as_deref());
            let embedded = item_schema.is_some_and(|s| s.x_embedded_resource);
            let items: Vec<Box<dyn Val + 'v>> = items
                .iter()
                .map(|v| to_val(v, item_schema, embedded))
                .collect();
            Box::new(CelList::from(items))
        }
        Value::Object(map) => {
            let mut out: HashMap<CelMapKey<'v>, Box<dyn Val + 'v>> =
                HashMap::with_capacity(map.len());
            match schema {
                Some(s) if s.additional_properties_schema().is_some() => {
                    let ap = s.additional_properties_schema();
                    let embedded = ap.is_some_and(|a| a.x_embedded_resource);
                    for (k, v) in map {
                        out.insert(CelMapKey::from(k.as_str()), to_val(v, ap, embedded));
                    }
                }
                Some(s) if !s.properties.is_empty() || is_root => {
                    for (k, v) in map {
                        let Some(name) = escape_cow(k) else { continue };
                        let name = match name {
                            std::borrow::Cow::Borrowed(_) => CelMapKey::from(k.as_str()),
                            std::borrow::Cow::Owned(escaped) => CelMapKey::from(escaped),
                        };
                        let sub = s.properties.get(k);
                        if is_root && k == "metadata" {
                            out.insert(name, root_metadata_val(v));
                            continue;
                        }
                        if sub.is_none() && !s.preserves_unknown_fields() && !is_root {
                            continue;
                        }
                        let embedded = sub.is_some_and(|p| p.x_embedded_resource);
                        out.insert(name, to_val(v, sub, embedded));
                    }
                }
                _ => {
                    for (k, v) in map {
                        out.insert(CelMapKey::from(k.as_str()), to_val(v, None, false));
                    }
                }
            }
            Box::new(CelMap::from(out))
        }
    }
}

/// [`root_metadata`] as the interpreter's value.
fn root_metadata_val(v: &Value) -> Box<dyn Val + '_> {
    let mut out: HashMap<CelMapKey<'_>, Box<dyn Val + '_>> = HashMap::new();
    for k in ["name", "generateName"] {
        if let Some(Value::String(s)) = v.get(k) {
            out.insert(CelMapKey::from(k), Box::new(CelString::from(s.as_str())));
        }
    }
    Box::new(CelMap::from(out))
}

/// A resource root's `metadata` as CEL sees it: `name` and `generateName` only.
fn root_metadata(v: &Value) -> cel::Value {
    let mut out: HashMap<Key, cel::Value> = HashMap::new();
    for k in ["name", "generateName"] {
        if let Some(Value::String(s)) = v.get(k) {
            out.insert(Key::from(k), cel::Value::String(Arc::new(s.clone())));
        }
    }
    cel::Value::Map(Map { map: Arc::new(out) })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A CRD-like root schema whose `spec` has `properties` and the rules given.
    fn schema_with(spec_props: Value, spec_rules: Value) -> Schema {
        Schema::from_json(&json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "properties": spec_props,
                "x-kubernetes-validations": spec_rules,
            }}
        }))
    }

    fn rendered(causes: &[StatusCause]) -> Vec<String> {
        causes
            .iter()
            .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
            .collect()
    }

    fn replicas_props() -> Value {
        json!({
            "replicas": {"type": "integer"},
            "minReplicas": {"type": "integer"},
            "name": {"type": "string"},
            "ratio": {"type": "number"},
            "port": {"x-kubernetes-int-or-string": true},
            "tags": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "x-y": {"type": "string"},
            "namespace": {"type": "string"},
        })
    }

    fn spec(value: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Thing",
               "metadata": {"name": "thing-1", "labels": {"a": "b"}}, "spec": value})
    }

    /// CEL's timestamp and duration types, and fields of `format: date-time` and
    /// `format: duration` seen as them (kube's `SchemaDeclType`), as Gateway API's HTTPRoute
    /// timeouts and many operators' rules use them.
    #[test]
    fn timestamps_and_durations_work_as_in_kube() {
        let props = json!({
            "when": {"type": "string", "format": "date-time"},
            "dur": {"type": "string", "format": "duration"},
            "backend": {"type": "string", "format": "duration"},
        });
        let object =
            spec(json!({"when": "2026-11-29T12:00:00Z", "dur": "1h30m", "backend": "90s"}));
        for rule in [
            "duration('1h') > duration('1m')",
            "timestamp('2023-05-28T00:00:00Z') < timestamp('2024-01-01T00:00:00Z')",
            "self.when.getFullYear() == 2026 && self.when.getHours() == 12",
            "self.dur > duration('1s') && self.dur == duration('90m')",
            "self.backend <= self.dur",
            "self.when + duration('24h') > self.when",
        ] {
            let schema = schema_with(props.clone(), json!([{"rule": rule}]));
            assert_eq!(
                rendered(&validate_cel(&schema, &object, None, &[])),
                Vec::<String>::new(),
                "{rule}"
            );
            assert!(
                compile_errors(
                    "spec.x-kubernetes-validations[0].rule",
                    &json!({"rule": rule}),
                    schema.properties.get("spec").expect("spec"),
                    false,
                    None
                )
                .is_empty(),
                "{rule}"
            );
        }
        let schema = schema_with(
            props,
            json!([{"rule": "self.backend > self.dur", "message": "backend timeout must not exceed the request timeout"}]),
        );
        assert_eq!(
            rendered(&validate_cel(&schema, &object, None, &[])),
            ["FieldValueInvalid spec: Invalid value: \"object\": backend timeout must not exceed the request timeout"]
        );
    }

    #[test]
    fn rules_on_an_object_pass_or_fail_with_kube_messages() {
        let base = json!({"replicas": 3, "minReplicas": 2, "name": "web", "ratio": 1,
                          "port": 8080, "tags": ["a", "bb"], "labels": {"app": "web"},
                          "x-y": "z", "namespace": "ns"});
        // (rule json, expected causes for `base`)
        let cases: Vec<(Value, Vec<&str>)> = vec![
            (json!({"rule": "self.minReplicas <= self.replicas"}), vec![]),
            (
                json!({"rule": "self.minReplicas > self.replicas", "message": "replicas must be at least minReplicas"}),
                vec!["FieldValueInvalid spec: Invalid value: \"object\": replicas must be at least minReplicas"],
            ),
            (
                json!({"rule": "self.minReplicas > self.replicas"}),
                vec!["FieldValueInvalid spec: Invalid value: \"object\": failed rule: self.minReplicas > self.replicas"],
            ),
            (
                json!({"rule": "self.replicas < 0", "message": "  padded  ", "reason": "FieldValueForbidden"}),
                vec!["FieldValueForbidden spec: Forbidden: padded"],
            ),
            (
                json!({"rule": "self.replicas < 0", "message": "needed", "reason": "FieldValueRequired", "fieldPath": ".replicas"}),
                vec!["FieldValueRequired spec.replicas: Required value: needed"],
            ),
            (
                json!({"rule": "self.replicas < 0", "reason": "FieldValueDuplicate", "fieldPath": ".labels['app.kubernetes.io/name']"}),
                vec!["FieldValueDuplicate spec.labels[app.kubernetes.io/name]: Duplicate value: \"object\""],
            ),
            (
                json!({"rule": "self.replicas < 0", "reason": "FieldValueInvalid", "fieldPath": ".nope", "message": "m"}),
                vec!["FieldValueInvalid spec: Invalid value: \"object\": m"],
            ),
            (
                json!({"rule": "self.replicas < 0", "messageExpression": "'replicas ' + string(self.replicas) + ' is not negative'"}),
                vec!["FieldValueInvalid spec: Invalid value: \"object\": replicas 3 is not negative"],
            ),
            (
                json!({"rule": "self.replicas < 0", "message": "fallback", "messageExpression": "'  '"}),
                vec!["FieldValueInvalid spec: Invalid value: \"object\": fallback"],
            ),
            (
                json!({"rule": "self.replicas < 0", "message": "fallback", "messageExpression": "self.missingKey"}),
                vec!["FieldValueInvalid spec: Invalid value: \"object\": fallback"],
            ),
            // The functions and macros rules commonly use.
            (json!({"rule": "size(self.name) == 3 && self.name.size() == 3 && size(self.tags) == 2"}), vec![]),
            (json!({"rule": "has(self.name) && !has(self.minReplicas2)"}), vec![]),
            (json!({"rule": "'a' in self.tags && !('c' in self.tags) && 'app' in self.labels"}), vec![]),
            (json!({"rule": "self.name.startsWith('w') && self.name.endsWith('b') && self.name.contains('e')"}), vec![]),
            (json!({"rule": "self.name.matches('^[a-z]+$') && !self.name.matches('[0-9]')"}), vec![]),
            (json!({"rule": "self.tags.all(t, t.size() <= 2) && self.tags.exists(t, t == 'bb')"}), vec![]),
            (json!({"rule": "self.tags.exists_one(t, t == 'a') && self.tags.map(t, t + '!').filter(t, t == 'a!').size() == 1"}), vec![]),
            (json!({"rule": "self.labels.all(k, self.labels[k] == 'web')"}), vec![]),
            (json!({"rule": "self.ratio == 1.0 && self.ratio > 0.5"}), vec![]),
            (json!({"rule": "self.x__dash__y == 'z' && self.__namespace__ == 'ns'"}), vec![]),
            (json!({"rule": "self.name.lowerAscii() == 'web' && self.name.upperAscii() == 'WEB'"}), vec![]),
            (json!({"rule": "type(self.port) == int ? self.port > 1024 : self.port.startsWith('http')"}), vec![]),
            (json!({"rule": "self.replicas != 3 || self.name != 'web'"}), vec![
                "FieldValueInvalid spec: Invalid value: \"object\": failed rule: self.replicas != 3 || self.name != 'web'",
            ]),
            // Evaluation errors, worded as kube reports them.
            (
                json!({"rule": "self.minReplicas2 == 1"}),
                vec!["FieldValueInvalid spec: Invalid value: \"object\": no such key: minReplicas2 evaluating rule: self.minReplicas2 == 1"],
            ),
            (
                json!({"rule": "self.port.startsWith('8')", "message": "port"}),
                vec!["FieldValueInvalid spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: port"],
            ),
            (
                json!({"rule": "self.name"}),
                vec!["FieldValueInvalid spec: Invalid value: \"object\": rule compile error: cel expression must evaluate to a bool"],
            ),
        ];
        for (rule, want) in cases {
            let schema = schema_with(
                json!({
                    "replicas": {"type": "integer"},
                    "minReplicas": {"type": "integer"},
                    "minReplicas2": {"type": "integer"},
                    "missingKey": {"type": "string"},
                    "name": {"type": "string"},
                    "ratio": {"type": "number"},
                    "port": {"x-kubernetes-int-or-string": true},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "x-y": {"type": "string"},
                    "namespace": {"type": "string"},
                }),
                json!([rule.clone()]),
            );
            let got = rendered(&validate_cel(&schema, &spec(base.clone()), None, &[]));
            assert_eq!(got, want, "rule {rule}");
        }
    }

    #[test]
    fn rules_on_scalars_list_items_and_map_values_use_indexed_paths() {
        let schema = Schema::from_json(&json!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('thing')", "message": "bad name"}],
            "properties": {"spec": {"type": "object", "properties": {
                "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() <= 3", "message": "too long"}]},
                "count": {"type": "integer", "x-kubernetes-validations": [{"rule": "self % 2 == 0"}]},
                "items": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "x-kubernetes-validations": [{"rule": "self.name.startsWith('a')", "message": "must start with a"}]}},
                "labels": {"type": "object", "additionalProperties": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self != ''", "message": "empty"}]}},
            }}}
        }));
        let good = spec(json!({"name": "abc", "count": 2, "items": [{"name": "ax"}],
                               "labels": {"a": "x"}}));
        assert!(validate_cel(&schema, &good, None, &[]).is_empty());
        let mut bad = spec(json!({"name": "abcd", "count": 3,
                                  "items": [{"name": "ax"}, {"name": "bx"}, {"name": "cx"}],
                                  "labels": {"a": "x", "b.c": ""}}));
        bad["metadata"]["name"] = json!("other");
        let got = rendered(&validate_cel(&schema, &bad, None, &[]));
        assert_eq!(
            got,
            [
                "FieldValueInvalid <nil>: Invalid value: \"object\": bad name",
                "FieldValueInvalid spec.name: Invalid value: \"string\": too long",
                "FieldValueInvalid spec.count: Invalid value: \"integer\": failed rule: self % 2 == 0",
                "FieldValueInvalid spec.items[1]: Invalid value: \"object\": must start with a",
                "FieldValueInvalid spec.items[2]: Invalid value: \"object\": must start with a",
                "FieldValueInvalid spec.labels[b.c]: Invalid value: \"string\": empty",
            ]
        );
        // Null values are not validated.
        let nulls = spec(json!({"name": null, "items": null}));
        assert!(validate_cel(&schema, &nulls, None, &[]).is_empty());
    }

    fn immutable_schema() -> Schema {
        Schema::from_json(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= 0"}]},
                "region": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "Value is immutable"}]},
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {
                              "name": {"type": "string"}, "port": {"type": "integer"}},
                              "x-kubernetes-validations": [
                                  {"rule": "self.port >= oldSelf.port", "message": "port may only grow"}]}},
                "tags": {"type": "array", "items": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "never checked"}]}},
            }}}
        }))
    }

    #[test]
    fn transition_rules_run_on_update_only_where_an_old_value_exists() {
        let schema = immutable_schema();
        let old = spec(
            json!({"region": "eu", "ports": [{"name": "http", "port": 80}],
                              "tags": ["a"]}),
        );
        // Create: `oldSelf` rules are skipped.
        assert!(validate_cel(&schema, &old, None, &[]).is_empty());
        // Update to the same values.
        assert!(validate_cel(&schema, &old, Some(&old), &[]).is_empty());
        // Update changing the immutable field, shrinking a correlated list-map item, adding a
        // new item (no old value: skipped) and changing an atomic list (never correlated).
        let new = spec(json!({"region": "us",
                              "ports": [{"name": "https", "port": 1}, {"name": "http", "port": 79}],
                              "tags": ["b"]}));
        let got = rendered(&validate_cel(&schema, &new, Some(&old), &[]));
        assert_eq!(
            got,
            [
                "FieldValueInvalid spec.region: Invalid value: \"string\": Value is immutable",
                "FieldValueInvalid spec.ports[1]: Invalid value: \"object\": port may only grow",
            ]
        );
        // The old object without the field: nothing to compare with.
        let before = spec(json!({}));
        assert!(validate_cel(&schema, &new, Some(&before), &[]).is_empty());
    }

    #[test]
    fn optional_old_self_rules_see_an_optional() {
        let schema = Schema::from_json(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "o1": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "!oldSelf.hasValue() || self == oldSelf.value()",
                     "message": "set once", "optionalOldSelf": true}]},
                "o2": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "oldSelf.hasValue()", "message": "no old value",
                     "optionalOldSelf": true}]},
            }}}
        }));
        // A create: `oldSelf` is optional.none(); the rule runs.
        let first = spec(json!({"o1": "a"}));
        assert!(validate_cel(&schema, &first, None, &[]).is_empty());
        let with_o2 = spec(json!({"o2": "x"}));
        assert_eq!(
            rendered(&validate_cel(&schema, &with_o2, None, &[])),
            ["FieldValueInvalid spec.o2: Invalid value: \"string\": no old value"]
        );
        // An update: `oldSelf` is optional.of(the old value).
        assert!(validate_cel(&schema, &first, Some(&first), &[]).is_empty());
        let changed = spec(json!({"o1": "b"}));
        assert_eq!(
            rendered(&validate_cel(&schema, &changed, Some(&first), &[])),
            ["FieldValueInvalid spec.o1: Invalid value: \"string\": set once"]
        );
        assert!(validate_cel(&schema, &with_o2, Some(&with_o2), &[]).is_empty());
    }

    #[test]
    fn unchanged_values_ratchet_and_blocking_schema_errors_stop_rules() {
        let schema = immutable_schema();
        let old = spec(json!({"replicas": -1, "region": "eu"}));
        // `replicas` was already invalid and is unchanged: its error is ratcheted.
        assert!(validate_cel(&schema, &old, Some(&old), &[]).is_empty());
        let changed = spec(json!({"replicas": -2, "region": "eu"}));
        assert_eq!(
            rendered(&validate_cel(&schema, &changed, Some(&old), &[])),
            ["FieldValueInvalid spec.replicas: Invalid value: \"integer\": failed rule: self >= 0"]
        );
        // On create nothing ratchets.
        assert_eq!(validate_cel(&schema, &old, None, &[]).len(), 1);

        let prior = [StatusCause {
            reason: "FieldValueTypeInvalid".into(),
            message: "Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"".into(),
            field: "spec.replicas".into(),
        }];
        assert_eq!(
            rendered(&validate_cel(&schema, &changed, None, &prior)),
            ["FieldValueInvalid <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"]
        );
        let not_blocking = [StatusCause {
            reason: "FieldValueInvalid".into(),
            message: "x".into(),
            field: "spec".into(),
        }];
        assert_eq!(
            validate_cel(&schema, &changed, None, &not_blocking).len(),
            1
        );
    }

    /// kube's runtime limits: a rule past its per-call limit fails with cel-go's words; once
    /// the object's budget is spent, no further rule runs.
    #[test]
    fn rules_past_the_cost_limit_fail_and_the_budget_stops_validation() {
        let schema = schema_with(
            json!({"l": {"type": "array", "items": {"type": "integer"},
                "x-kubernetes-validations": [
                    {"rule": "self.all(x, self.all(y, x >= 0))"},
                    {"rule": "self.size() < 0", "message": "never"}]}}),
            json!([]),
        );
        let object = spec(json!({"l": (0..1500).collect::<Vec<i64>>()}));
        // kube stops there: the rule after it does not run.
        assert_eq!(
            rendered(&validate_cel(&schema, &object, None, &[])),
            [
                "FieldValueInvalid spec.l: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.all(y, x >= 0))",
            ]
        );
        // A messageExpression past its limit ends the validation too, with kube's words.
        let message_schema = schema_with(
            json!({"l": {"type": "array", "items": {"type": "integer"},
                "x-kubernetes-validations": [
                    {"rule": "self.size() < 0",
                     "messageExpression": "string(self.filter(x, self.exists(y, y < 0)).size())"},
                    {"rule": "self.size() < 0", "message": "never"}]}}),
            json!([]),
        );
        assert_eq!(
            rendered(&validate_cel(&message_schema, &object, None, &[])),
            ["FieldValueInvalid spec.l: Invalid value: \"array\": no further validation rules will be run due to call cost exceeds limit for messageExpression: \"string(self.filter(x, self.exists(y, y < 0)).size())\""]
        );
        // A cheap evaluation that no longer fits the budget left ends the validation.
        let node = Node {
            rules: &schema,
            schema: &schema,
            path: String::new(),
            is_root: true,
        };
        let mut out = Out {
            causes: Vec::new(),
            remaining_budget: 3,
            exhausted: false,
        };
        let ratchet = Ratchet {
            old: None,
            parent_unchanged: false,
        };
        walk(&node, &object, None, ratchet, &mut out);
        assert!(out.exhausted);
        assert_eq!(
            rendered(&out.causes),
            ["FieldValueInvalid spec.l: Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run"]
        );
    }

    #[test]
    fn rules_ratchet_on_map_list_items_by_key_and_under_all_of_by_the_parent() {
        let schema = schema_with(
            json!({
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "port": {"type": "integer",
                            "x-kubernetes-validations": [{"rule": "self < 100"}]}}}},
                "tier": {"type": "string", "allOf": [{"x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "tier is immutable"}]}]},
            }),
            json!([]),
        );
        let old = spec(
            json!({"ports": [{"name": "web", "port": 8080}, {"name": "dns", "port": 53}],
            "tier": "gold"}),
        );
        // `web` is unchanged although the list was reordered and `dns` changed.
        let new = spec(
            json!({"ports": [{"name": "dns", "port": 54}, {"name": "web", "port": 8080}],
            "tier": "gold"}),
        );
        assert!(validate_cel(&schema, &new, Some(&old), &[]).is_empty());
        let new = spec(json!({"ports": [{"name": "web", "port": 8081}], "tier": "gold"}));
        assert_eq!(
            rendered(&validate_cel(&schema, &new, Some(&old), &[])),
            ["FieldValueInvalid spec.ports[0].port: Invalid value: \"integer\": failed rule: self < 100"]
        );
        // Transition rules under `allOf` see `oldSelf`, as in kube.
        let new = spec(json!({"ports": [], "tier": "silver"}));
        assert_eq!(
            rendered(&validate_cel(&schema, &new, Some(&old), &[])),
            ["FieldValueInvalid spec.tier: Invalid value: \"string\": tier is immutable"]
        );
    }

    #[test]
    fn compile_errors_name_the_rule_as_kube_prints_it() {
        let schema = schema_with(replicas_props(), json!([]));
        let spec_schema = &schema.properties["spec"];
        let check = |rule: Value| -> Vec<String> {
            rendered(&compile_errors(
                "p.x-kubernetes-validations[0]",
                &rule,
                spec_schema,
                false,
                None,
            ))
        };
        let ok = [
            "self.minReplicas <= self.replicas",
            "self.tags.all(t, t.size() < 10) && self.labels.exists(k, k == 'a')",
            "has(self.name) ? self.name.matches('^a') : true",
            "self.x__dash__y == self.__namespace__",
            "type(self.port) == string || self.port > 0",
            "optional.none() == optional.none()",
        ];
        for rule in ok {
            assert_eq!(check(json!({"rule": rule})), Vec::<String>::new(), "{rule}");
        }
        let rule_value = "apiextensions.ValidationRule{Rule:\"self.replicas ==\", Message:\"m\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}";
        assert_eq!(
            check(json!({"rule": "self.replicas ==", "message": "m"})),
            [format!("FieldValueInvalid p.x-kubernetes-validations[0].rule: Invalid value: {rule_value}: compilation failed: ERROR: <input>:1:17: Syntax error: mismatched input '<EOF>' expecting {{'[', '{{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}}\n | self.replicas ==\n | ................^")]
        );
        let cases = [
            ("foo == 1", "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^"),
            ("self.replica > 1", "compilation failed: ERROR: <input>:1:5: undefined field 'replica'\n | self.replica > 1\n | ....^"),
            ("self.replicas", ""),
            ("self.replicas + 1", "cel expression must evaluate to a bool"),
            ("'yes'", "cel expression must evaluate to a bool"),
        ];
        for (rule, detail) in cases {
            let got = check(json!({"rule": rule}));
            assert_eq!(
                got.len(),
                usize::from(!detail.is_empty()),
                "{rule}: {got:?}"
            );
            if let Some(first) = got.first() {
                assert!(
                    first.starts_with("FieldValueInvalid p.x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:"),
                    "{first}"
                );
                assert!(first.ends_with(&format!("}}: {detail}")), "{rule}: {first}");
            }
        }
        // A rule at a resource root sees `apiVersion`, `kind` and `metadata.name` only.
        let root = |rule: &str| compile_errors("r", &json!({"rule": rule}), &schema, true, None);
        assert!(
            root("self.metadata.name != '' && self.kind == 'Thing' && self.apiVersion != ''")
                .is_empty()
        );
        let labels = rendered(&root("self.metadata.labels.size() > 0"));
        assert_eq!(labels.len(), 1);
        assert!(labels[0].contains("undefined field 'labels'"), "{labels:?}");
        // Fields an object keeps without declaring them are not part of its CEL type.
        let open = Schema::from_json(&json!({"type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"k": {"type": "integer"}}}));
        let open_rule = |rule: &str| {
            rendered(&compile_errors(
                "r",
                &json!({"rule": rule}),
                &open,
                false,
                None,
            ))
        };
        assert!(open_rule("!has(self.k) || self.k == 1").is_empty());
        let unknown = open_rule("!has(self.foo) || self.foo == 1");
        assert!(
            unknown
                .first()
                .is_some_and(|e| e.contains("undefined field 'foo'")),
            "{unknown:?}"
        );
        // messageExpression errors, and the rule's other fields in the printed value.
        let got = check(
            json!({"rule": "self.replicas > 0", "messageExpression": "'a' +",
                               "reason": "FieldValueForbidden", "fieldPath": ".replicas",
                               "optionalOldSelf": true}),
        );
        // Both kube's errors: the messageExpression's, then optionalOldSelf without oldSelf.
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(
            got[1],
            "FieldValueInvalid p.x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
        );
        assert!(got[0].starts_with("FieldValueInvalid p.x-kubernetes-validations[0].messageExpression: Invalid value: apiextensions.ValidationRule{Rule:\"self.replicas > 0\", Message:\"\", MessageExpression:\"'a' +\", Reason:(*apiextensions.FieldValueErrorReason)(0xc000000000), FieldPath:\".replicas\", OptionalOldSelf:(*bool)(0xc000000000)}: messageExpression compilation failed: ERROR: <input>:1:6: Syntax error:"), "{got:?}");
        let got =
            check(json!({"rule": "self.replicas > 0", "messageExpression": "self.replicas > 1"}));
        assert_eq!(got.len(), 1);
        assert!(
            got[0].ends_with(": messageExpression must evaluate to a string"),
            "{got:?}"
        );
    }

    #[test]
    fn kube_libraries_run_in_rules_with_kube_messages() {
        let schema = schema_with(
            json!({
                "memory": {"type": "string"},
                "cidr": {"type": "string"},
                "ip": {"type": "string"},
                "endpoint": {"type": "string"},
                "name": {"type": "string"},
            }),
            json!([
                {"rule": "quantity(self.memory).compareTo(quantity('1Gi')) <= 0",
                 "message": "memory must be at most 1Gi"},
                {"rule": "cidr(self.cidr).containsIP(self.ip)", "message": "ip outside cidr"},
                {"rule": "url(self.endpoint).getScheme() == 'https'",
                 "message": "endpoint must use https"},
                {"rule": "!format.dns1123Label().validate(self.name).hasValue()",
                 "messageExpression":
                     "'name: ' + format.dns1123Label().validate(self.name).value().join(', ')"},
            ]),
        );
        let good = spec(
            json!({"memory": "512Mi", "cidr": "10.0.0.0/8", "ip": "10.1.2.3",
                               "endpoint": "https://kube.io/hook", "name": "web-1"}),
        );
        assert_eq!(
            rendered(&validate_cel(&schema, &good, None, &[])),
            Vec::<String>::new()
        );
        let bad = spec(
            json!({"memory": "2Gi", "cidr": "10.0.0.0/8", "ip": "11.1.2.3",
                              "endpoint": "http://kube.io", "name": "Web_1"}),
        );
        assert_eq!(
            rendered(&validate_cel(&schema, &bad, None, &[])),
            [
                "FieldValueInvalid spec: Invalid value: \"object\": memory must be at most 1Gi",
                "FieldValueInvalid spec: Invalid value: \"object\": ip outside cidr",
                "FieldValueInvalid spec: Invalid value: \"object\": endpoint must use https",
                "FieldValueInvalid spec: Invalid value: \"object\": name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            ]
        );
        // The libraries' errors are the rules' runtime errors.
        let broken = spec(
            json!({"memory": "lots", "cidr": "10.0.0.0", "ip": "10.1.2.3",
                                 "endpoint": "kube.io", "name": "ok"}),
        );
        assert_eq!(
            rendered(&validate_cel(&schema, &broken, None, &[])),
            [
                "FieldValueInvalid spec: Invalid value: \"object\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' evaluating rule: memory must be at most 1Gi",
                "FieldValueInvalid spec: Invalid value: \"object\": network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix(\"10.0.0.0\"): no '/' evaluating rule: ip outside cidr",
                "FieldValueInvalid spec: Invalid value: \"object\": URL parse error during conversion from string: parse \"kube.io\": invalid URI for request evaluating rule: endpoint must use https",
            ]
        );
    }

    #[test]
    fn rules_using_kube_libraries_are_checked_when_the_crd_is_written() {
        let schema = schema_with(replicas_props(), json!([]));
        let spec_schema = &schema.properties["spec"];
        let check = |rule: &str| -> Vec<String> {
            rendered(&compile_errors(
                "r",
                &json!({"rule": rule}),
                spec_schema,
                false,
                None,
            ))
        };
        for rule in [
            "quantity(self.name).isLessThan(quantity('1Gi'))",
            "isQuantity(self.name) && sign(quantity(self.name)) >= 0",
            "format.dns1123Label().validate(self.name) == optional.none()",
            "format.named('uuid').hasValue()",
            "sets.contains(self.tags, ['a']) && sets.intersects(self.tags, ['b'])",
            "type(ip(self.name)) == net.IP && type(cidr(self.name)) != net.CIDR",
            "ip.isCanonical(self.name) && isIP(self.name) && isCIDR(self.name)",
            "isURL(self.name) && url(self.name).getHost() != ''",
            "self.name.find('[a-z]+') != '' && self.name.findAll('a', 2).size() < 3",
            "self.tags.isSorted() && self.tags.indexOf('a') >= 0",
            // A comprehension variable may be called `ip`.
            "self.tags.all(ip, isIP(ip))",
        ] {
            assert_eq!(check(rule), Vec::<String>::new(), "{rule}");
        }
        let detail = |rule: &str| -> String {
            let got = check(rule);
            assert_eq!(got.len(), 1, "{rule}: {got:?}");
            got[0]
                .rsplit_once("}: ")
                .map_or(String::new(), |(_, d)| d.to_string())
        };
        for rule in [
            "quantity(self.name)",
            "url(self.name)",
            "ip(self.name).family()",
            "cidr(self.name).masked()",
            "format.uri()",
            "self.name.find('a')",
        ] {
            assert_eq!(
                detail(rule),
                "cel expression must evaluate to a bool",
                "{rule}"
            );
        }
        assert_eq!(
            detail("self.name.find('[') == ''"),
            "program instantiation failed: error parsing regexp: unclosed character class: `[`"
        );
        assert!(
            detail("net.URL == net.IP").contains("undeclared reference to 'net' (in container '')"),
            "net.URL"
        );
    }

    #[test]
    fn programs_are_compiled_once_per_rule_text() {
        let a = compiled("self.cached_rule_probe == 1", Output::Bool);
        let b = compiled("self.cached_rule_probe == 1", Output::Bool);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!a.uses_old_self);
        let t = compiled("self == oldSelf", Output::Bool);
        assert!(t.uses_old_self);
        // A comprehension variable named `oldSelf` is not the old object.
        let shadow = compiled("[1].all(oldSelf, oldSelf == 1)", Output::Bool);
        assert!(!shadow.uses_old_self && shadow.program.is_ok());
    }

    #[test]
    fn property_names_are_escaped_as_kube_does() {
        for (name, want) in [
            ("foo", Some("foo")),
            ("x-y", Some("x__dash__y")),
            ("a.b/c", Some("a__dot__b__slash__c")),
            ("a__b", Some("a__underscores__b")),
            ("namespace", Some("__namespace__")),
            ("1a", None),
            ("a b", None),
            ("", None),
        ] {
            assert_eq!(escape(name).as_deref(), want, "{name}");
        }
    }
}
