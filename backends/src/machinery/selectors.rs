//! Label and field selectors, parsed and matched exactly as k8s.io/apimachinery's
//! `labels.Parse` and `fields.ParseSelector` do (same grammar, same quirks, same error text),
//! plus the conversion of a `metav1.LabelSelector` object (`matchLabels` + `matchExpressions`)
//! into a [`LabelSelector`] as `metav1.LabelSelectorAsSelector` does.
//!
//! Clients (kubectl, client-go) build selector strings with kube's own printer and read our
//! parse errors back, so the grammar and messages follow kube byte for byte rather than a
//! cleaner design of our own.

use crate::machinery::go_quote;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
// kube 1.33's label key and value checks.
use crate::machinery::validation::{
    is_qualified_name as label_key_errors, is_valid_label_value as label_value_errors,
};

// ---------------------------------------------------------------------------------------------
// Label selectors
// ---------------------------------------------------------------------------------------------

/// A label requirement operator (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelOperator {
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)`
    NotIn,
    /// `key=value`
    Equals,
    /// `key==value`
    DoubleEquals,
    /// `key!=value`
    NotEquals,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>5` (integer comparison; a non-integer label value never matches)
    GreaterThan,
    /// `key<5`
    LessThan,
}

impl LabelOperator {
    /// The operator's name as kube spells it (`selection.Operator` string values).
    pub fn as_str(self) -> &'static str {
        match self {
            LabelOperator::In => "in",
            LabelOperator::NotIn => "notin",
            LabelOperator::Equals => "=",
            LabelOperator::DoubleEquals => "==",
            LabelOperator::NotEquals => "!=",
            LabelOperator::Exists => "exists",
            LabelOperator::DoesNotExist => "!",
            LabelOperator::GreaterThan => "gt",
            LabelOperator::LessThan => "lt",
        }
    }
}

/// One `key op values` term of a label selector (`labels.Requirement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelRequirement {
    key: String,
    operator: LabelOperator,
    values: Vec<String>,
}

impl LabelRequirement {
    /// Builds a validated requirement, as kube's `labels.NewRequirement` (with no field path).
    /// Every problem is reported, aggregated the way kube's `utilerrors.NewAggregate` prints.
    pub fn new(
        key: &str,
        operator: LabelOperator,
        values: Vec<String>,
    ) -> Result<LabelRequirement, String> {
        let mut errors: Vec<String> = Vec::new();
        if let Some(e) = validate_label_key(key, "key") {
            errors.push(e);
        }
        let count_problem = match operator {
            LabelOperator::In | LabelOperator::NotIn if values.is_empty() => {
                Some("for 'in', 'notin' operators, values set can't be empty")
            }
            LabelOperator::Equals | LabelOperator::DoubleEquals | LabelOperator::NotEquals
                if values.len() != 1 =>
            {
                Some("exact-match compatibility requires one single value")
            }
            LabelOperator::Exists | LabelOperator::DoesNotExist if !values.is_empty() => {
                Some("values set must be empty for exists and does not exist")
            }
            LabelOperator::GreaterThan | LabelOperator::LessThan if values.len() != 1 => {
                Some("for 'Gt', 'Lt' operators, exactly one value is required")
            }
            _ => None,
        };
        if let Some(detail) = count_problem {
            errors.push(format!(
                "values: Invalid value: {}: {detail}",
                go_json_string_list(&values)
            ));
        }
        if matches!(
            operator,
            LabelOperator::GreaterThan | LabelOperator::LessThan
        ) {
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errors.push(format!(
                        "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                        go_quote(v)
                    ));
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let problems = label_value_errors(v);
            if !problems.is_empty() {
                errors.push(format!(
                    "values[{i}][{key}]: Invalid value: {}: {}",
                    go_quote(v),
                    problems.join("; ")
                ));
            }
        }
        if errors.is_empty() {
            Ok(LabelRequirement {
                key: key.to_string(),
                operator,
                values,
            })
        } else {
            Err(aggregate(errors))
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> LabelOperator {
        self.operator
    }

    /// The values in the order they were given (sorted and de-duplicated when parsed).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether `labels` satisfy this requirement (`Requirement.Matches`).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let has_value = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            LabelOperator::In | LabelOperator::Equals | LabelOperator::DoubleEquals => {
                labels.get(&self.key).is_some_and(|v| has_value(v))
            }
            LabelOperator::NotIn | LabelOperator::NotEquals => {
                labels.get(&self.key).is_none_or(|v| !has_value(v))
            }
            LabelOperator::Exists => labels.contains_key(&self.key),
            LabelOperator::DoesNotExist => !labels.contains_key(&self.key),
            LabelOperator::GreaterThan | LabelOperator::LessThan => {
                // Both sides must be integers; anything else simply does not match, as in kube.
                let Some(label) = labels.get(&self.key).and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let [bound] = self.values.as_slice() else {
                    return false;
                };
                let Ok(bound) = bound.parse::<i64>() else {
                    return false;
                };
                if self.operator == LabelOperator::GreaterThan {
                    label > bound
                } else {
                    label < bound
                }
            }
        }
    }
}

impl fmt::Display for LabelRequirement {
    /// kube's `Requirement.String()`: `!k`, `k`, `k=v`, `k in (a,b)` with sorted values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == LabelOperator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            LabelOperator::Equals => "=",
            LabelOperator::DoubleEquals => "==",
            LabelOperator::NotEquals => "!=",
            LabelOperator::In => " in ",
            LabelOperator::NotIn => " notin ",
            LabelOperator::GreaterThan => ">",
            LabelOperator::LessThan => "<",
            LabelOperator::Exists | LabelOperator::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        let set = matches!(self.operator, LabelOperator::In | LabelOperator::NotIn);
        if set {
            f.write_str("(")?;
        }
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        f.write_str(&values.join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A parsed label selector: a conjunction of requirements, sorted by key as kube sorts them.
///
/// The default value selects everything. [`LabelSelector::nothing`] (what a `null`
/// `metav1.LabelSelector` converts to) selects nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<LabelRequirement>,
    nothing: bool,
}

impl LabelSelector {
    /// The selector that matches every object (`labels.Everything()`).
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// The selector that matches no object (`labels.Nothing()`).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses a selector string (`labels.Parse`): comma-separated requirements with `=`,
    /// `==`, `!=`, `in (..)`, `notin (..)`, `>`, `<`, `key` and `!key`.
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut parser = Parser::new(s);
        let mut requirements = parser.parse()?;
        // Kube sorts by key so equal selectors print and compare the same whatever the order.
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Builds a selector from requirements (kube's `NewSelector().Add(...)`), sorted by key.
    pub fn from_requirements(mut requirements: Vec<LabelRequirement>) -> LabelSelector {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            nothing: false,
        }
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True for a selector with no requirement (it selects everything). The nothing-selector
    /// is not empty, as in kube.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    /// True for [`LabelSelector::nothing`].
    pub fn matches_nothing(&self) -> bool {
        self.nothing
    }

    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.requirements
    }
}

impl fmt::Display for LabelSelector {
    /// kube's `Selector.String()`; the nothing-selector prints as the empty string like kube's.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// Converts a `metav1.LabelSelector` JSON value into a [`LabelSelector`], as kube's
/// `metav1.LabelSelectorAsSelector`: `null` selects nothing, `{}` selects everything,
/// `matchLabels` become `=` requirements and `matchExpressions` use the operators `In`,
/// `NotIn`, `Exists`, `DoesNotExist`.
pub fn from_label_selector_json(v: &serde_json::Value) -> Result<LabelSelector, String> {
    let object = match v {
        serde_json::Value::Null => return Ok(LabelSelector::nothing()),
        serde_json::Value::Object(o) => o,
        other => {
            return Err(format!(
                "label selector must be an object, not {}",
                json_type(other)
            ))
        }
    };
    let mut requirements = Vec::new();
    match object.get("matchLabels") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Object(labels)) => {
            // Go ranges over a map in random order; sorting keeps the first reported error
            // stable from one request to the next.
            let sorted: BTreeMap<&String, &serde_json::Value> = labels.iter().collect();
            for (key, value) in sorted {
                let value = value.as_str().ok_or_else(|| {
                    format!(
                        "matchLabels.{key}: value must be a string, not {}",
                        json_type(value)
                    )
                })?;
                requirements.push(LabelRequirement::new(
                    key,
                    LabelOperator::Equals,
                    vec![value.to_string()],
                )?);
            }
        }
        Some(other) => {
            return Err(format!(
                "matchLabels must be an object, not {}",
                json_type(other)
            ))
        }
    }
    match object.get("matchExpressions") {
        None | Some(serde_json::Value::Null) => {}
        Some(serde_json::Value::Array(expressions)) => {
            for (i, expression) in expressions.iter().enumerate() {
                requirements.push(expression_requirement(i, expression)?);
            }
        }
        Some(other) => {
            return Err(format!(
                "matchExpressions must be an array, not {}",
                json_type(other)
            ))
        }
    }
    Ok(LabelSelector::from_requirements(requirements))
}

/// One `matchExpressions` item (`LabelSelectorRequirement`) as a requirement.
fn expression_requirement(
    index: usize,
    expression: &serde_json::Value,
) -> Result<LabelRequirement, String> {
    let at = format!("matchExpressions[{index}]");
    let object = expression
        .as_object()
        .ok_or_else(|| format!("{at} must be an object, not {}", json_type(expression)))?;
    let string_field = |name: &str| -> Result<String, String> {
        match object.get(name) {
            None | Some(serde_json::Value::Null) => Ok(String::new()),
            Some(serde_json::Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(format!(
                "{at}.{name} must be a string, not {}",
                json_type(other)
            )),
        }
    };
    let key = string_field("key")?;
    let operator_name = string_field("operator")?;
    let operator = match operator_name.as_str() {
        "In" => LabelOperator::In,
        "NotIn" => LabelOperator::NotIn,
        "Exists" => LabelOperator::Exists,
        "DoesNotExist" => LabelOperator::DoesNotExist,
        _ => {
            return Err(format!(
                "{} is not a valid label selector operator",
                go_quote(&operator_name)
            ))
        }
    };
    let values = match object.get("values") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(j, item)| {
                item.as_str().map(str::to_string).ok_or_else(|| {
                    format!("{at}.values[{j}] must be a string, not {}", json_type(item))
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(format!(
                "{at}.values must be an array, not {}",
                json_type(other)
            ))
        }
    };
    LabelRequirement::new(&key, operator, values)
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

// --- lexer and parser: a port of labels/selector.go, quirks included -------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

/// The literal tokens (kube's `string2token`).
fn keyword(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// Next byte, or 0 at the end. As in kube, a NUL byte in the input reads like the end.
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if is_special_symbol(c) || is_whitespace(c) {
                self.unread();
                break;
            }
            buffer.push(c);
        }
        let token = keyword(&buffer).unwrap_or(Token::Identifier);
        // Identifiers are cut at ASCII bytes only, so they stay valid UTF-8.
        (token, String::from_utf8_lossy(&buffer).into_owned())
    }

    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        let mut last: Option<(Token, String)> = None;
        loop {
            let c = self.read();
            if c == 0 {
                break;
            }
            if !is_special_symbol(c) {
                self.unread();
                break;
            }
            buffer.push(c);
            if let Some(t) = keyword(&buffer) {
                last = Some((t, String::from_utf8_lossy(&buffer).into_owned()));
            } else if last.is_some() {
                // Longest match: the symbol that made it unknown belongs to the next token.
                self.unread();
                break;
            }
        }
        last.unwrap_or_else(|| {
            (
                Token::Error,
                format!(
                    "error expected: keyword found '{}'",
                    String::from_utf8_lossy(&buffer)
                ),
            )
        })
    }

    fn lex(&mut self) -> (Token, String) {
        let mut c = self.read();
        while is_whitespace(c) {
            c = self.read();
        }
        if c == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special_symbol(c) {
            self.scan_special_symbol()
        } else {
            self.scan_id_or_keyword()
        }
    }
}

/// Whether `in`/`notin` are keywords (after a key) or plain identifiers (as values, keys).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    position: usize,
}

impl Parser {
    fn new(s: &str) -> Parser {
        let mut lexer = Lexer {
            s: s.as_bytes(),
            pos: 0,
        };
        let mut items = Vec::new();
        loop {
            let item = lexer.lex();
            let end = item.0 == Token::EndOfString;
            items.push(item);
            if end {
                break;
            }
        }
        Parser { items, position: 0 }
    }

    fn item(&self, index: usize, context: Context) -> (Token, String) {
        // The list always ends with EndOfString and parsing stops there, so clamping is only a
        // guard against reading past it.
        let (token, literal) = self
            .items
            .get(index)
            .or(self.items.last())
            .cloned()
            .unwrap_or((Token::EndOfString, String::new()));
        let token = match (context, token) {
            (Context::Values, Token::In | Token::NotIn) => Token::Identifier,
            (_, t) => t,
        };
        (token, literal)
    }

    fn lookahead(&self, context: Context) -> (Token, String) {
        self.item(self.position, context)
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let item = self.item(self.position, context);
        self.position += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<LabelRequirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ))
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<LabelRequirement, String> {
        let (key, operator) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (LabelOperator::Exists | LabelOperator::DoesNotExist)) = operator {
            return LabelRequirement::new(&key, op, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            LabelOperator::In | LabelOperator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        // kube collects values in a string set: de-duplicated and sorted.
        LabelRequirement::new(&key, operator, values.into_iter().collect())
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<LabelOperator>), String> {
        let mut operator = None;
        let (mut token, mut literal) = self.consume(Context::Values);
        if token == Token::DoesNotExist {
            operator = Some(LabelOperator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        // kube validates the key against a nil field path here, hence the literal "<nil>".
        if let Some(e) = validate_label_key(&literal, "<nil>") {
            return Err(e);
        }
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::EndOfString | Token::Comma) && operator.is_none() {
            operator = Some(LabelOperator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<LabelOperator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        Ok(match token {
            Token::In => LabelOperator::In,
            Token::Equals => LabelOperator::Equals,
            Token::DoubleEquals => LabelOperator::DoubleEquals,
            Token::GreaterThan => LabelOperator::GreaterThan,
            Token::LessThan => LabelOperator::LessThan,
            Token::NotIn => LabelOperator::NotIn,
            Token::NotEquals => LabelOperator::NotEquals,
            _ => {
                return Err(format!(
                    "found '{literal}', expected: in, notin, =, ==, !=, gt, lt"
                ))
            }
        })
    }

    fn parse_values(&mut self) -> Result<BTreeSet<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let set = self.parse_identifiers_list()?;
                let (closing, _) = self.consume(Context::Values);
                if closing != Token::ClosedPar {
                    // kube reports the token that opened the list here, not the offending one.
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(set)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(BTreeSet::from([String::new()]))
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut set = BTreeSet::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    set.insert(literal);
                    let (next, next_literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{next_literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    // `(,a)`, `(a,)` and `(a,,b)` all carry an empty value.
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    let (next, _) = self.lookahead(Context::Values);
                    if next == Token::ClosedPar {
                        set.insert(String::new());
                        return Ok(set);
                    }
                    if next == Token::Comma {
                        set.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<BTreeSet<String>, String> {
        let (next, _) = self.lookahead(Context::Values);
        if matches!(next, Token::EndOfString | Token::Comma) {
            return Ok(BTreeSet::from([String::new()]));
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            return Ok(BTreeSet::from([literal]));
        }
        Err(format!("found '{literal}', expected: identifier"))
    }
}

/// `field.Invalid(path, key, ...)` text for a bad key, or `None` when the key is valid.
fn validate_label_key(key: &str, path: &str) -> Option<String> {
    let errors = label_key_errors(key);
    if errors.is_empty() {
        None
    } else {
        Some(format!(
            "{path}: Invalid value: {}: {}",
            go_quote(key),
            errors.join("; ")
        ))
    }
}

/// kube's `utilerrors.NewAggregate(..).Error()`: one message alone, several de-duplicated in
/// brackets.
fn aggregate(errors: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.concat()
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// How Go's `encoding/json` prints a `[]string` bad value inside a field error: `null` for the
/// nil slice kube passes when no values were given, HTML characters escaped as Go does.
fn go_json_string_list(values: &[String]) -> String {
    if values.is_empty() {
        return "null".to_string();
    }
    let json = serde_json::to_string(values).unwrap_or_default();
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

// ---------------------------------------------------------------------------------------------
// Field selectors
// ---------------------------------------------------------------------------------------------

/// One `field=value` or `field!=value` term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    /// The unescaped value.
    pub value: String,
    /// `=`/`==` when true, `!=` when false.
    pub equal: bool,
}

/// A parsed field selector (`fields.ParseSelector`): a conjunction of equality terms. Terms are
/// kept in kube's order (sorted by their source text). The default value selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// Parses `a=b,c!=d,e==f`; `\`, `,` and `=` in values are escaped with a backslash
    /// (`fields.EscapeValue`).
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut terms = split_field_terms(s);
        // kube sorts the raw terms before parsing them (byte order, as Go compares strings).
        terms.sort_unstable();
        let mut requirements = Vec::new();
        for term in terms {
            if term.is_empty() {
                continue;
            }
            let Some((field, op, raw_value)) = split_field_term(term) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            let value = unescape_field_value(raw_value)?;
            // kube's identity transform turns a term with empty field and value into
            // "everything", which the conjunction then drops.
            if field.is_empty() && value.is_empty() {
                continue;
            }
            requirements.push(FieldRequirement {
                field: field.to_string(),
                value,
                equal: op != "!=",
            });
        }
        Ok(FieldSelector { requirements })
    }

    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether an object matches. `lookup` returns a field's value; a missing field compares
    /// as the empty string, as kube's `fields.Set.Get` does.
    pub fn matches(&self, lookup: impl Fn(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| {
            let actual = lookup(&r.field).unwrap_or_default();
            (actual == r.value) == r.equal
        })
    }

    /// True when the selector has no term (it selects everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The value of the first `field=value` term for `field` (kube's `RequiresExactMatch`).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.equal && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// The name a `metadata.name=x` term pins the selection to, if any. Other terms may still
    /// narrow it further (kube's `RequiresExactMatch("metadata.name")`).
    pub fn single_name(&self) -> Option<&str> {
        self.requires_exact_match("metadata.name")
    }
}

impl fmt::Display for FieldSelector {
    /// kube's `Selector.String()`: `f=v` / `f!=v` with values re-escaped, comma-joined.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if r.equal { "=" } else { "!=" };
            write!(f, "{}{op}{}", r.field, escape_field_value(&r.value))?;
        }
        Ok(())
    }
}

/// kube's `fields.EscapeValue`: backslash-escapes `\`, `,` and `=`.
pub fn escape_field_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Splits on commas that are not escaped by a backslash (kube's `splitTerms`).
fn split_field_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits a term at the first operator (`!=`, `==`, `=`, tried in that order at each position).
fn split_field_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], op, value));
            }
        }
    }
    None
}

/// kube's `fields.UnescapeValue`, including its error texts (the unescaped-rune error prints
/// the character's code point, as Go's `%v` of a rune does).
fn unescape_field_value(s: &str) -> Result<String, String> {
    if !s.contains(['\\', ',', '=']) {
        return Ok(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => {
                    return Err(format!(
                        "invalid field selector: invalid escape sequence: \\{c}"
                    ))
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ))
            }
            _ => out.push(c),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_string());
    }
    Ok(out)
}

#[cfg(test)]
// Tests may unwrap: a panic is the failure report.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn parse(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("parse {s:?}: {e}"))
    }

    fn parse_err(s: &str) -> String {
        match LabelSelector::parse(s) {
            Ok(sel) => panic!("parse {s:?} should fail, got {sel:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn good_selectors_round_trip_like_kube() {
        // kube's TestSelectorParse: printing gives the input without spaces.
        for s in [
            "x=a,y=b,z=c",
            "",
            "x!=a,y=b",
            "x=",
            "x= ",
            "x=,z= ",
            "x= ,z= ",
            "!x",
            "x>1",
            "x>1,z<5",
        ] {
            assert_eq!(parse(s).to_string(), s.replace(' ', ""), "{s}");
        }
    }

    #[test]
    fn bad_selectors_are_rejected() {
        for s in [
            "x=a||y=b",
            "x==a==b",
            "!x=a",
            "x<a",
            "x,,y",
            ",x,y",
            "x nott in (y)",
            "a in (xyz),",
            "a in (xyz)b notin ()",
            "a in (xyz abc)",
            "a notin(",
            "a (",
            "(",
            "x in",
            "=a",
            "key=a b",
        ] {
            assert!(LabelSelector::parse(s).is_err(), "{s:?} should fail");
        }
    }

    #[test]
    fn parsed_structure_matches_kube() {
        let cases: &[(&str, &str)] = &[
            ("\rx", "x"),
            (
                "this-is-a-dns.domain.com/key-with-dash",
                "this-is-a-dns.domain.com/key-with-dash",
            ),
            (
                "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
                "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
            ),
            ("foo  in\t (abc)", "foo in (abc)"),
            ("x notin\n (abc)", "x notin (abc)"),
            ("x in (abc,)", "x in (,abc)"),
            ("x in (abc,abc)", "x in (abc)"),
            ("x in ()", "x in ()"),
            ("x in (a,,)", "x in (,a)"),
            ("x in (a,,a,,a,,a,,)", "x in (,a)"),
            (
                "x notin (abc,,def),bar,z in (),w",
                "bar,w,x notin (,abc,def),z in ()",
            ),
            ("x,y in (a)", "x,y in (a)"),
            ("x notin ( )", "x notin ()"),
            ("x notin (, a)", "x notin (,a)"),
            ("a ", "a"),
            ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
            ("notin=in", "notin=in"),
            ("in", "in"),
            ("x==a", "x==a"),
            ("b=2,a=1", "a=1,b=2"),
            (
                "env in (prod, qa), tier notin (frontend), !legacy",
                "env in (prod,qa),!legacy,tier notin (frontend)",
            ),
            ("example.com/app=web", "example.com/app=web"),
        ];
        for (input, printed) in cases {
            assert_eq!(parse(input).to_string(), *printed, "{input:?}");
        }
        let sel = parse("x notin (abc,,def)");
        let r = &sel.requirements()[0];
        assert_eq!(r.key(), "x");
        assert_eq!(r.operator(), LabelOperator::NotIn);
        assert_eq!(r.values(), ["", "abc", "def"]);
        let sel = parse("!x");
        assert_eq!(
            sel.requirements()[0].operator(),
            LabelOperator::DoesNotExist
        );
        assert!(sel.requirements()[0].values().is_empty());
    }

    #[test]
    fn matching_follows_kube() {
        let yes = |s: &str, l: &[(&str, &str)]| assert!(parse(s).matches(&set(l)), "{s} ~ {l:?}");
        let no = |s: &str, l: &[(&str, &str)]| assert!(!parse(s).matches(&set(l)), "{s} !~ {l:?}");
        yes("", &[("x", "y")]);
        yes("", &[]);
        yes("x=y", &[("x", "y")]);
        yes("x=y,z=w", &[("x", "y"), ("z", "w")]);
        yes("x!=y,z!=w", &[("x", "z"), ("z", "a")]);
        yes("notin=in", &[("notin", "in")]);
        yes("x", &[("x", "z")]);
        yes("!x", &[("y", "z")]);
        yes("x>1", &[("x", "2")]);
        yes("x<1", &[("x", "0")]);
        yes("x<1", &[("x", "-5")]);
        yes("x!=y", &[]);
        yes("x notin (a,b)", &[]);
        yes("x notin (a,b)", &[("x", "c")]);
        yes("x in (a,b)", &[("x", "b")]);
        yes("x in (a,)", &[("x", "")]);
        yes("x=", &[("x", "")]);
        no("x=z", &[]);
        no("x=y", &[("x", "z")]);
        no("x=y,z=w", &[("x", "w"), ("z", "w")]);
        no("x!=y,z!=w", &[("x", "z"), ("z", "w")]);
        no("x", &[("y", "z")]);
        no("!x", &[("x", "z")]);
        no("x>1", &[("x", "0")]);
        no("x<1", &[("x", "2")]);
        no("x>1", &[("x", "v2")]);
        no("x>1", &[]);
        no("x in (a,b)", &[("x", "c")]);
        no("x in (a,b)", &[]);
        no("x notin (a,b)", &[("x", "a")]);
        no("x=", &[]);
    }

    #[test]
    fn empty_and_nothing() {
        assert!(parse("").is_empty());
        assert!(parse("  ").is_empty());
        assert!(!parse("a").is_empty());
        assert!(LabelSelector::everything().is_empty());
        let nothing = LabelSelector::nothing();
        assert!(!nothing.is_empty());
        assert!(nothing.matches_nothing());
        assert!(!nothing.matches(&set(&[])));
        assert!(!nothing.matches(&set(&[("a", "b")])));
    }

    #[test]
    fn parse_error_messages_match_kube() {
        assert_eq!(
            parse_err("x=a||y=b"),
            "unable to parse requirement: values[0][x]: Invalid value: \"a||y\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        assert_eq!(
            parse_err("x==a==b"),
            "found '==', expected: ',' or 'end of string'"
        );
        assert_eq!(
            parse_err("!x=a"),
            "found '=', expected: ',' or 'end of string'"
        );
        assert_eq!(
            parse_err("x<a"),
            "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        assert_eq!(
            parse_err("x,,y"),
            "found ',', expected: identifier after ','"
        );
        assert_eq!(
            parse_err("a in (xyz),"),
            "found '', expected: identifier after ','"
        );
        assert_eq!(
            parse_err(",x"),
            "found ',', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            parse_err("x nott in (y)"),
            "unable to parse requirement: found 'nott', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            parse_err("a in (xyz abc)"),
            "unable to parse requirement: found 'abc', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("a notin("),
            "unable to parse requirement: found '', expected: ',', ')' or identifier"
        );
        assert_eq!(
            parse_err("a ("),
            "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt"
        );
        assert_eq!(
            parse_err("("),
            "found '(', expected: !, identifier, or 'end of string'"
        );
        assert_eq!(
            parse_err("x in a"),
            "unable to parse requirement: found 'a' expected: '('"
        );
        assert_eq!(
            parse_err("x in (a"),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert_eq!(
            parse_err("x in (a,="),
            "unable to parse requirement: found '=', expected: ',', or identifier"
        );
        assert_eq!(
            parse_err("x=("),
            "unable to parse requirement: found '(', expected: identifier"
        );
        assert_eq!(
            parse_err("!"),
            "unable to parse requirement: found '', expected: identifier"
        );
        assert_eq!(
            parse_err("-x"),
            "unable to parse requirement: <nil>: Invalid value: \"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        assert_eq!(
            parse_err("Example.com/x"),
            "unable to parse requirement: <nil>: Invalid value: \"Example.com/x\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert_eq!(
            parse_err("/x"),
            "unable to parse requirement: <nil>: Invalid value: \"/x\": prefix part must be non-empty"
        );
        let e = parse_err("a/");
        assert!(e.starts_with("unable to parse requirement: <nil>: Invalid value: \"a/\": name part must be non-empty; name part must consist of"), "{e}");
        let e = parse_err("a/b/c");
        assert!(
            e.contains("Invalid value: \"a/b/c\": a qualified name must consist of"),
            "{e}"
        );
        assert!(
            e.ends_with(
                "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ),
            "{e}"
        );
        let long = "k".repeat(64);
        let e = parse_err(&long);
        assert!(
            e.contains("name part must be no more than 63 characters"),
            "{e}"
        );
        assert!(!e.contains("name part must consist"), "{e}");
        let e = parse_err(&format!("k={}", "v".repeat(64)));
        assert!(e.contains("values[0][k]: Invalid value:"), "{e}");
        assert!(e.ends_with("must be no more than 63 characters"), "{e}");
        // several bad values in a set are aggregated in brackets, sorted like kube's string set.
        let e = parse_err("k in (-a,-b)");
        assert!(
            e.starts_with("unable to parse requirement: [values[0][k]: Invalid value: \"-a\": "),
            "{e}"
        );
        assert!(e.contains(", values[1][k]: Invalid value: \"-b\": "), "{e}");
        assert!(e.ends_with(']'), "{e}");
        assert_eq!(
            parse_err("x<1,y>1.5"),
            "unable to parse requirement: values[0]: Invalid value: \"1.5\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
    }

    #[test]
    fn lexer_quirks() {
        // Longest-match special symbols: `=!` is `=` then `!`.
        assert_eq!(
            parse_err("x=!y"),
            "unable to parse requirement: found '!', expected: identifier"
        );
        // Non-ASCII in a key or value is lexed as part of the identifier and then rejected.
        assert!(parse_err("clé=v").contains("Invalid value: \"clé\""));
        assert!(parse_err("k=vé").contains("values[0][k]: Invalid value: \"vé\""));
        // A NUL byte reads like the end of input, as in kube's lexer.
        assert_eq!(parse("a\0").to_string(), "a");
        // Tab/CR/LF are whitespace.
        assert_eq!(parse("a\t=\r\nb").to_string(), "a=b");
    }

    #[test]
    fn requirement_constructor_validates_counts() {
        assert_eq!(
            LabelRequirement::new("x", LabelOperator::In, vec![]).unwrap_err(),
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            LabelRequirement::new("x", LabelOperator::Exists, vec!["a".into()]).unwrap_err(),
            "values: Invalid value: [\"a\"]: values set must be empty for exists and does not exist"
        );
        assert_eq!(
            LabelRequirement::new("x", LabelOperator::Equals, vec!["a".into(), "b".into()])
                .unwrap_err(),
            "values: Invalid value: [\"a\",\"b\"]: exact-match compatibility requires one single value"
        );
        let e = LabelRequirement::new("-x", LabelOperator::NotIn, vec![]).unwrap_err();
        assert!(
            e.starts_with("[key: Invalid value: \"-x\": name part must consist"),
            "{e}"
        );
        assert!(e.ends_with(", values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty]"), "{e}");
        let r = LabelRequirement::new("x", LabelOperator::GreaterThan, vec!["3".into()]).unwrap();
        assert!(r.matches(&set(&[("x", "4")])));
        assert_eq!(r.to_string(), "x>3");
        assert_eq!(LabelOperator::DoesNotExist.as_str(), "!");
    }

    #[test]
    fn label_selector_json_conversion() {
        let sel = from_label_selector_json(&json!({
            "matchLabels": {"app": "web", "tier": "front"},
            "matchExpressions": [
                {"key": "env", "operator": "In", "values": ["prod", "qa"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "track", "operator": "NotIn", "values": ["canary"]},
                {"key": "owner", "operator": "Exists", "values": []}
            ]
        }))
        .unwrap();
        assert_eq!(
            sel.to_string(),
            "app=web,env in (prod,qa),!legacy,owner,tier=front,track notin (canary)"
        );
        assert!(sel.matches(&set(&[
            ("app", "web"),
            ("tier", "front"),
            ("env", "qa"),
            ("owner", "me"),
        ])));
        assert!(!sel.matches(&set(&[
            ("app", "web"),
            ("tier", "front"),
            ("env", "qa"),
            ("owner", "me"),
            ("legacy", "yes"),
        ])));
        assert!(!sel.matches(&set(&[
            ("app", "web"),
            ("tier", "front"),
            ("env", "qa"),
            ("owner", "me"),
            ("track", "canary"),
        ])));

        // null selects nothing, {} selects everything.
        let nothing = from_label_selector_json(&serde_json::Value::Null).unwrap();
        assert!(nothing.matches_nothing() && !nothing.matches(&set(&[])));
        let everything = from_label_selector_json(&json!({})).unwrap();
        assert!(everything.is_empty() && everything.matches(&set(&[("a", "b")])));
        let everything =
            from_label_selector_json(&json!({"matchLabels": {}, "matchExpressions": []})).unwrap();
        assert!(everything.is_empty());

        assert_eq!(
            from_label_selector_json(
                &json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
            )
            .unwrap_err(),
            "\"Gt\" is not a valid label selector operator"
        );
        assert_eq!(
            from_label_selector_json(
                &json!({"matchExpressions": [{"key": "a", "operator": "In"}]})
            )
            .unwrap_err(),
            "values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            from_label_selector_json(&json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}))
                .unwrap_err(),
            "values: Invalid value: [\"x\"]: values set must be empty for exists and does not exist"
        );
        assert!(
            from_label_selector_json(&json!({"matchLabels": {"a": "b c"}}))
                .unwrap_err()
                .starts_with("values[0][a]: Invalid value: \"b c\": a valid label must be")
        );
        assert!(
            from_label_selector_json(&json!({"matchLabels": {"-a": "b"}}))
                .unwrap_err()
                .starts_with("key: Invalid value: \"-a\": name part must consist")
        );
        assert_eq!(
            from_label_selector_json(&json!({"matchLabels": {"a": 1}})).unwrap_err(),
            "matchLabels.a: value must be a string, not a number"
        );
        assert_eq!(
            from_label_selector_json(&json!({"matchExpressions": {}})).unwrap_err(),
            "matchExpressions must be an array, not an object"
        );
        assert_eq!(
            from_label_selector_json(
                &json!({"matchExpressions": [{"key": "a", "operator": "In", "values": [1]}]})
            )
            .unwrap_err(),
            "matchExpressions[0].values[0] must be a string, not a number"
        );
        assert_eq!(
            from_label_selector_json(&json!("app=web")).unwrap_err(),
            "label selector must be an object, not a string"
        );
        // Values from JSON keep their given order and duplicates (kube does not sort them).
        let sel = from_label_selector_json(&json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["z", "y", "z"]}]})).unwrap();
        assert_eq!(sel.requirements()[0].values(), ["z", "y", "z"]);
        assert_eq!(sel.to_string(), "a in (y,z,z)");
    }

    #[test]
    fn go_formatting_helpers() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), "\"a\\\"b\\\\c\\n\\x01é\"");
        assert_eq!(
            go_json_string_list(&["<a&b>".to_string()]),
            "[\"\\u003ca\\u0026b\\u003e\"]"
        );
        assert_eq!(aggregate(vec!["a".into(), "a".into()]), "a");
        assert_eq!(
            aggregate(vec!["a".into(), "b".into(), "a".into()]),
            "[a, b]"
        );
    }

    fn fields(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap_or_else(|e| panic!("parse {s:?}: {e}"))
    }

    fn req(field: &str, value: &str, equal: bool) -> FieldRequirement {
        FieldRequirement {
            field: field.into(),
            value: value.into(),
            equal,
        }
    }

    #[test]
    fn field_selector_parsing() {
        assert!(fields("").is_empty());
        assert!(fields(",").is_empty());
        assert!(
            fields("=").is_empty(),
            "empty field and value is dropped like kube"
        );
        assert_eq!(fields("a=b").requirements(), [req("a", "b", true)]);
        assert_eq!(fields("a==b").requirements(), [req("a", "b", true)]);
        assert_eq!(fields("a!=b").requirements(), [req("a", "b", false)]);
        assert_eq!(fields("a=").requirements(), [req("a", "", true)]);
        assert_eq!(fields("=b").requirements(), [req("", "b", true)]);
        // terms are sorted by their text, as kube does before parsing.
        assert_eq!(
            fields("z=1,a!=2,m==3").requirements(),
            [
                req("a", "2", false),
                req("m", "3", true),
                req("z", "1", true)
            ]
        );
        assert_eq!(fields("z=1,a!=2,m==3").to_string(), "a!=2,m=3,z=1");
        // escapes
        assert_eq!(
            fields(r"a=b\,c\=d\\e").requirements(),
            [req("a", r"b,c=d\e", true)]
        );
        assert_eq!(fields(r"a=b\,c").to_string(), r"a=b\,c");
        // whitespace is part of names and values, as in kube
        assert_eq!(fields(" a = b ").requirements(), [req(" a ", " b ", true)]);
        // `!` before `=` in the field name
        assert_eq!(fields("a!b=c").requirements(), [req("a!b", "c", true)]);
        assert_eq!(
            fields("spec.nodeName=,status.phase!=Running").requirements(),
            [
                req("spec.nodeName", "", true),
                req("status.phase", "Running", false)
            ]
        );
        assert_eq!(escape_field_value(r"a,b=c\d"), r"a\,b\=c\\d");
    }

    #[test]
    fn field_selector_errors_match_kube() {
        assert_eq!(
            FieldSelector::parse("metadata.name=name1,foo").unwrap_err(),
            "invalid selector: 'metadata.name=name1,foo'; can't understand 'foo'"
        );
        assert_eq!(
            FieldSelector::parse("a=b=c").unwrap_err(),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            FieldSelector::parse("a==b==c").unwrap_err(),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            FieldSelector::parse(r"a=b\x").unwrap_err(),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            FieldSelector::parse(r"a=b\").unwrap_err(),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert!(FieldSelector::parse("abc").is_err());
    }

    #[test]
    fn field_selector_matching_and_name() {
        let sel = fields("metadata.name=foo,metadata.namespace!=kube-system");
        let object = |f: &str| match f {
            "metadata.name" => Some("foo".to_string()),
            "metadata.namespace" => Some("default".to_string()),
            _ => None,
        };
        assert!(sel.matches(object));
        assert!(
            !sel.matches(|f: &str| (f == "metadata.namespace").then(|| "kube-system".to_string()))
        );
        assert_eq!(sel.single_name(), Some("foo"));
        assert_eq!(sel.requires_exact_match("metadata.namespace"), None);
        // missing fields compare as ""
        assert!(fields("spec.nodeName=").matches(|_: &str| None));
        assert!(!fields("spec.nodeName!=").matches(|_: &str| None));
        assert!(fields("spec.nodeName!=n1").matches(|_: &str| None));
        assert_eq!(fields("metadata.name!=foo").single_name(), None);
        assert_eq!(
            fields("metadata.name==a,metadata.name=b").single_name(),
            Some("a")
        );
        assert_eq!(fields("").single_name(), None);
        assert!(fields("").matches(|_: &str| None));
    }
}
