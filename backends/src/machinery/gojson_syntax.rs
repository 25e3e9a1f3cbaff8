//! The syntax error Go's `encoding/json` reports for a document (its scanner, which every
//! `json.Unmarshal` runs over the whole input first), word for word: `invalid character 'o' in
//! literal null (expecting 'u')`, `invalid character 'b' looking for beginning of object key
//! string`, `unexpected end of JSON input`. kube puts these texts in its answers (a body it
//! cannot decode, a `.dockerconfigjson` that is not JSON), so kubegate words them the same way
//! instead of passing on its own parser's.

/// Go's limit on nesting (`maxNestingDepth`).
const MAX_DEPTH: usize = 10_000;

#[derive(Clone, Copy, PartialEq)]
enum Parse {
    ObjectKey,
    ObjectValue,
    ArrayValue,
}

#[derive(Clone, Copy, PartialEq)]
enum Step {
    BeginValue,
    BeginValueOrEmpty,
    BeginStringOrEmpty,
    BeginString,
    EndValue,
    EndTop,
    InString,
    InStringEsc,
    InStringEscU(u8),
    Neg,
    One,
    Zero,
    Dot,
    Dot0,
    E,
    ESign,
    E0,
    /// Inside `true`, `false` or `null`: the rest still expected, and the literal's name.
    Literal(&'static [u8], &'static str),
}

/// The first syntax error of `data` as one JSON document, in Go's words; `None` when Go's
/// scanner accepts it.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut scanner = Scanner {
        step: Step::BeginValue,
        stack: Vec::new(),
        end_top: false,
    };
    for &c in data {
        if let Some(error) = scanner.step(c) {
            return Some(error);
        }
    }
    // Go's `eof`: a space ends a pending number; anything else unfinished is truncated input.
    if scanner.end_top {
        return None;
    }
    if let Some(error) = scanner.step(b' ') {
        return Some(error);
    }
    if scanner.end_top {
        return None;
    }
    Some("unexpected end of JSON input".to_string())
}

struct Scanner {
    step: Step,
    stack: Vec<Parse>,
    end_top: bool,
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// Go's `quoteChar`: the byte as a rune, quoted as `strconv.Quote` would, in single quotes.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        0x07 => r"'\a'".to_string(),
        0x08 => r"'\b'".to_string(),
        0x0c => r"'\f'".to_string(),
        b'\n' => r"'\n'".to_string(),
        b'\r' => r"'\r'".to_string(),
        b'\t' => r"'\t'".to_string(),
        0x0b => r"'\v'".to_string(),
        b'\\' => r"'\\'".to_string(),
        0x00..=0x1f | 0x7f => format!(r"'\x{c:02x}'"),
        // C1 controls, the no-break space and the soft hyphen are not printable in Go.
        0x80..=0xa0 | 0xad => format!(r"'\u{c:04x}'"),
        _ => format!("'{}'", char::from(c)),
    }
}

fn error(c: u8, context: &str) -> Option<String> {
    Some(format!("invalid character {} {context}", quote_char(c)))
}

impl Scanner {
    /// Feeds one byte; `Some` is the error it causes.
    fn step(&mut self, c: u8) -> Option<String> {
        match self.step {
            Step::BeginValueOrEmpty => {
                if is_space(c) {
                    return None;
                }
                if c == b']' {
                    return self.end_value(c);
                }
                self.begin_value(c)
            }
            Step::BeginValue => self.begin_value(c),
            Step::BeginStringOrEmpty => {
                if is_space(c) {
                    return None;
                }
                if c == b'}' {
                    if let Some(top) = self.stack.last_mut() {
                        *top = Parse::ObjectValue;
                    }
                    return self.end_value(c);
                }
                self.begin_string(c)
            }
            Step::BeginString => self.begin_string(c),
            Step::EndValue => self.end_value(c),
            Step::EndTop => {
                if !is_space(c) {
                    return error(c, "after top-level value");
                }
                None
            }
            Step::InString => {
                match c {
                    b'"' => self.step = Step::EndValue,
                    b'\\' => self.step = Step::InStringEsc,
                    _ if c < 0x20 => return error(c, "in string literal"),
                    _ => {}
                }
                None
            }
            Step::InStringEsc => {
                match c {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {
                        self.step = Step::InString
                    }
                    b'u' => self.step = Step::InStringEscU(0),
                    _ => return error(c, "in string escape code"),
                }
                None
            }
            Step::InStringEscU(seen) => {
                if !c.is_ascii_hexdigit() {
                    return error(c, "in \\u hexadecimal character escape");
                }
                self.step = if seen == 3 {
                    Step::InString
                } else {
                    Step::InStringEscU(seen + 1)
                };
                None
            }
            Step::Neg => {
                match c {
                    b'0' => self.step = Step::Zero,
                    b'1'..=b'9' => self.step = Step::One,
                    _ => return error(c, "in numeric literal"),
                }
                None
            }
            Step::One => {
                if c.is_ascii_digit() {
                    return None;
                }
                self.zero(c)
            }
            Step::Zero => self.zero(c),
            Step::Dot => {
                if !c.is_ascii_digit() {
                    return error(c, "after decimal point in numeric literal");
                }
                self.step = Step::Dot0;
                None
            }
            Step::Dot0 => {
                if c.is_ascii_digit() {
                    return None;
                }
                if c == b'e' || c == b'E' {
                    self.step = Step::E;
                    return None;
                }
                self.end_value(c)
            }
            Step::E => {
                if c == b'+' || c == b'-' {
                    self.step = Step::ESign;
                    return None;
                }
                self.e_sign(c)
            }
            Step::ESign => self.e_sign(c),
            Step::E0 => {
                if c.is_ascii_digit() {
                    return None;
                }
                self.end_value(c)
            }
            Step::Literal(rest, name) => {
                let Some((&expected, more)) = rest.split_first() else {
                    return self.end_value(c);
                };
                if c != expected {
                    return error(
                        c,
                        &format!("in literal {name} (expecting {})", quote_char(expected)),
                    );
                }
                self.step = if more.is_empty() {
                    Step::EndValue
                } else {
                    Step::Literal(more, name)
                };
                None
            }
        }
    }

    fn push(&mut self, parse: Parse, c: u8) -> Option<String> {
        self.stack.push(parse);
        if self.stack.len() > MAX_DEPTH {
            return error(c, "exceeded max depth");
        }
        None
    }

    fn begin_value(&mut self, c: u8) -> Option<String> {
        if is_space(c) {
            return None;
        }
        match c {
            b'{' => {
                self.step = Step::BeginStringOrEmpty;
                return self.push(Parse::ObjectKey, c);
            }
            b'[' => {
                self.step = Step::BeginValueOrEmpty;
                return self.push(Parse::ArrayValue, c);
            }
            b'"' => self.step = Step::InString,
            b'-' => self.step = Step::Neg,
            b'0' => self.step = Step::Zero,
            b't' => self.step = Step::Literal(b"rue", "true"),
            b'f' => self.step = Step::Literal(b"alse", "false"),
            b'n' => self.step = Step::Literal(b"ull", "null"),
            b'1'..=b'9' => self.step = Step::One,
            _ => return error(c, "looking for beginning of value"),
        }
        None
    }

    fn begin_string(&mut self, c: u8) -> Option<String> {
        if is_space(c) {
            return None;
        }
        if c == b'"' {
            self.step = Step::InString;
            return None;
        }
        error(c, "looking for beginning of object key string")
    }

    fn zero(&mut self, c: u8) -> Option<String> {
        match c {
            b'.' => self.step = Step::Dot,
            b'e' | b'E' => self.step = Step::E,
            _ => return self.end_value(c),
        }
        None
    }

    fn e_sign(&mut self, c: u8) -> Option<String> {
        if !c.is_ascii_digit() {
            return error(c, "in exponent of numeric literal");
        }
        self.step = Step::E0;
        None
    }

    fn pop(&mut self) {
        self.stack.pop();
        if self.stack.is_empty() {
            self.step = Step::EndTop;
            self.end_top = true;
        } else {
            self.step = Step::EndValue;
        }
    }

    fn end_value(&mut self, c: u8) -> Option<String> {
        let Some(&top) = self.stack.last() else {
            self.step = Step::EndTop;
            self.end_top = true;
            return self.step(c);
        };
        if is_space(c) {
            self.step = Step::EndValue;
            return None;
        }
        match top {
            Parse::ObjectKey => {
                if c != b':' {
                    return error(c, "after object key");
                }
                if let Some(top) = self.stack.last_mut() {
                    *top = Parse::ObjectValue;
                }
                self.step = Step::BeginValue;
            }
            Parse::ObjectValue => match c {
                b',' => {
                    if let Some(top) = self.stack.last_mut() {
                        *top = Parse::ObjectKey;
                    }
                    self.step = Step::BeginString;
                }
                b'}' => self.pop(),
                _ => return error(c, "after object key:value pair"),
            },
            Parse::ArrayValue => match c {
                b',' => self.step = Step::BeginValue,
                b']' => self.pop(),
                _ => return error(c, "after array element"),
            },
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::syntax_error;

    #[test]
    fn go_words_syntax_errors() {
        for (input, message) in [
            (
                "notjson",
                "invalid character 'o' in literal null (expecting 'u')",
            ),
            (
                "{bad",
                "invalid character 'b' looking for beginning of object key string",
            ),
            ("", "unexpected end of JSON input"),
            ("{\"a\":", "unexpected end of JSON input"),
            ("{\"a\" 1}", "invalid character '1' after object key"),
            (
                "{\"a\":1 \"b\"}",
                "invalid character '\"' after object key:value pair",
            ),
            ("[1 2]", "invalid character '2' after array element"),
            ("{} x", "invalid character 'x' after top-level value"),
            ("{}x", "invalid character 'x' after top-level value"),
            // Go's end of input feeds a space: a cut literal or exponent is named by it.
            (
                "tru",
                "invalid character ' ' in literal true (expecting 'e')",
            ),
            (
                "trux",
                "invalid character 'x' in literal true (expecting 'e')",
            ),
            (
                "fals3",
                "invalid character '3' in literal false (expecting 'e')",
            ),
            ("-a", "invalid character 'a' in numeric literal"),
            (
                "1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            (
                "1e+",
                "invalid character ' ' in exponent of numeric literal",
            ),
            ("\"abc", "unexpected end of JSON input"),
            (
                "1ex",
                "invalid character 'x' in exponent of numeric literal",
            ),
            ("\"a\\qb\"", "invalid character 'q' in string escape code"),
            (
                "\"\\u12g4\"",
                "invalid character 'g' in \\u hexadecimal character escape",
            ),
            ("\"a\nb\"", "invalid character '\\n' in string literal"),
            (
                "\u{1f}",
                "invalid character '\\x1f' looking for beginning of value",
            ),
            (
                "'a'",
                "invalid character '\\'' looking for beginning of value",
            ),
            ("01", "invalid character '1' after top-level value"),
        ] {
            assert_eq!(
                syntax_error(input.as_bytes()).as_deref(),
                Some(message),
                "{input:?}"
            );
        }
        // The gzip magic byte kube names in a compressed body.
        assert_eq!(
            syntax_error(&[0x1f, 0x8b]).as_deref(),
            Some("invalid character '\\x1f' looking for beginning of value")
        );
        assert_eq!(
            syntax_error(&[b'"', 0xff, b'"', b'x']).as_deref(),
            Some("invalid character 'x' after top-level value")
        );
        assert_eq!(
            syntax_error(&[0x80]).as_deref(),
            Some("invalid character '\\u0080' looking for beginning of value")
        );
        let deep = "[".repeat(10_001);
        assert_eq!(
            syntax_error(deep.as_bytes()).as_deref(),
            Some("invalid character '[' exceeded max depth")
        );
        for valid in [
            "{}",
            " [1, -2.5e+3, true, false, null, \"\\u00e9\"] ",
            "0",
            "\"x\"",
        ] {
            assert_eq!(syntax_error(valid.as_bytes()), None, "{valid}");
        }
    }
}
