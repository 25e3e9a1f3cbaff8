//! The `pattern` keyword of CRD schemas: a small backtracking matcher for the RE2 subset
//! schemas use (literals, `.`, classes with ranges and `\d \w \s`, anchors `^ $ \b`, groups,
//! alternation and the `* + ? {n,m}` quantifiers, greedy or lazy). kube compiles patterns with
//! Go's `regexp`, which searches unanchored, so [`Pattern::is_match`] does too. Matching has a
//! step budget: a pathological pattern stops matching instead of stalling a request.

/// A compiled `pattern`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    alternatives: Vec<Vec<Node>>,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Char(char),
    Any,
    Class(Class),
    Start,
    End,
    WordBoundary(bool),
    Group(Vec<Vec<Node>>),
    Repeat {
        node: Box<Node>,
        min: usize,
        max: Option<usize>,
        greedy: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Default)]
struct Class {
    negated: bool,
    ranges: Vec<(char, char)>,
    perl: Vec<(char, bool)>,
}

impl Class {
    fn matches(&self, c: char) -> bool {
        let hit = self.ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi)
            || self
                .perl
                .iter()
                .any(|(p, negated)| perl_matches(*p, c) != *negated);
        hit != self.negated
    }
}

fn perl_matches(class: char, c: char) -> bool {
    match class {
        'd' => c.is_ascii_digit(),
        'w' => c.is_ascii_alphanumeric() || c == '_',
        's' => matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0c' | '\x0b'),
        _ => false,
    }
}

const STEP_BUDGET: usize = 1_000_000;

impl Pattern {
    /// Compiles a pattern; the error is worded like Go's `regexp` syntax errors
    /// (`missing closing ): ...`).
    pub fn new(pattern: &str) -> Result<Pattern, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut parser = Parser {
            chars: &chars,
            pos: 0,
            source: pattern,
        };
        let alternatives = parser.alternation(0)?;
        if parser.pos < chars.len() {
            return Err(format!("unexpected ): `{pattern}`"));
        }
        Ok(Pattern { alternatives })
    }

    /// Whether the pattern matches anywhere in `text`.
    pub fn is_match(&self, text: &str) -> bool {
        let input: Vec<char> = text.chars().collect();
        let m = Matcher {
            input: &input,
            steps: std::cell::Cell::new(0),
        };
        (0..=input.len()).any(|start| m.alternatives(&self.alternatives, start, &mut |_| true))
    }
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
    source: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn alternation(&mut self, depth: usize) -> Result<Vec<Vec<Node>>, String> {
        if depth > 100 {
            return Err(format!("expression nests too deeply: `{}`", self.source));
        }
        let mut alternatives = vec![self.sequence(depth)?];
        while self.peek() == Some('|') {
            self.pos += 1;
            alternatives.push(self.sequence(depth)?);
        }
        Ok(alternatives)
    }

    fn sequence(&mut self, depth: usize) -> Result<Vec<Node>, String> {
        let mut nodes = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom(depth)?;
            let atom = self.quantified(atom)?;
            nodes.push(atom);
        }
        Ok(nodes)
    }

    fn quantified(&mut self, atom: Node) -> Result<Node, String> {
        let (min, max) = match self.peek() {
            Some('*') => {
                self.pos += 1;
                (0, None)
            }
            Some('+') => {
                self.pos += 1;
                (1, None)
            }
            Some('?') => {
                self.pos += 1;
                (0, Some(1))
            }
            Some('{') => match self.braces() {
                Some(bounds) => bounds,
                None => return Ok(atom),
            },
            _ => return Ok(atom),
        };
        if let Some(max) = max {
            if max < min || max > 1000 {
                return Err(format!("invalid repeat count: `{}`", self.source));
            }
        }
        let greedy = if self.peek() == Some('?') {
            self.pos += 1;
            false
        } else {
            true
        };
        if matches!(self.peek(), Some('*' | '+' | '?')) {
            return Err(format!(
                "invalid nested repetition operator: `{}`",
                self.source
            ));
        }
        Ok(Node::Repeat {
            node: Box::new(atom),
            min,
            max,
            greedy,
        })
    }

    /// `{n}`, `{n,}` or `{n,m}`; anything else is a literal `{` (as in Go).
    fn braces(&mut self) -> Option<(usize, Option<usize>)> {
        let rest: String = self.chars[self.pos..].iter().collect();
        let close = rest.find('}')?;
        let inner = &rest[1..close];
        let (min, max) = match inner.split_once(',') {
            None => {
                let n = inner.parse().ok()?;
                (n, Some(n))
            }
            Some((lo, "")) => (lo.parse().ok()?, None),
            Some((lo, hi)) => (lo.parse().ok()?, Some(hi.parse().ok()?)),
        };
        self.pos += inner.chars().count() + 2;
        Some((min, max))
    }

    fn atom(&mut self, depth: usize) -> Result<Node, String> {
        let Some(c) = self.peek() else {
            return Err(format!("missing argument: `{}`", self.source));
        };
        self.pos += 1;
        match c {
            '.' => Ok(Node::Any),
            '^' => Ok(Node::Start),
            '$' => Ok(Node::End),
            '*' | '+' | '?' => Err(format!("missing argument to repetition operator: `{c}`")),
            '(' => {
                if self.peek() == Some('?') {
                    // Non-capturing `(?:` and named `(?P<name>` groups.
                    let rest: String = self.chars[self.pos..].iter().collect();
                    if rest.starts_with("?:") {
                        self.pos += 2;
                    } else if rest.starts_with("?P<") {
                        let Some(end) = rest.find('>') else {
                            return Err(format!("invalid named capture: `{}`", self.source));
                        };
                        self.pos += rest[..=end].chars().count();
                    } else {
                        return Err(format!(
                            "invalid or unsupported Perl syntax: `{}`",
                            self.source
                        ));
                    }
                }
                let inner = self.alternation(depth + 1)?;
                if self.peek() != Some(')') {
                    return Err(format!("missing closing ): `{}`", self.source));
                }
                self.pos += 1;
                Ok(Node::Group(inner))
            }
            '[' => self.class(),
            '\\' => self.escape(false).map(|e| match e {
                Escaped::Char(c) => Node::Char(c),
                Escaped::Perl(p, negated) => Node::Class(Class {
                    perl: vec![(p, negated)],
                    ..Class::default()
                }),
                Escaped::Boundary(b) => Node::WordBoundary(b),
            }),
            other => Ok(Node::Char(other)),
        }
    }

    fn escape(&mut self, in_class: bool) -> Result<Escaped, String> {
        let Some(c) = self.peek() else {
            return Err("trailing backslash at end of expression: ``".into());
        };
        self.pos += 1;
        Ok(match c {
            'd' | 'w' | 's' => Escaped::Perl(c, false),
            'D' | 'W' | 'S' => Escaped::Perl(c.to_ascii_lowercase(), true),
            'b' if !in_class => Escaped::Boundary(true),
            'B' if !in_class => Escaped::Boundary(false),
            'n' => Escaped::Char('\n'),
            't' => Escaped::Char('\t'),
            'r' => Escaped::Char('\r'),
            'f' => Escaped::Char('\x0c'),
            'v' => Escaped::Char('\x0b'),
            c if c.is_ascii_alphanumeric() => {
                return Err(format!("invalid escape sequence: `\\{c}`"));
            }
            c => Escaped::Char(c),
        })
    }

    fn class(&mut self) -> Result<Node, String> {
        let mut class = Class::default();
        if self.peek() == Some('^') {
            class.negated = true;
            self.pos += 1;
        }
        let mut first = true;
        loop {
            let Some(c) = self.peek() else {
                return Err(format!("missing closing ]: `{}`", self.source));
            };
            if c == ']' && !first {
                self.pos += 1;
                break;
            }
            first = false;
            self.pos += 1;
            let low = if c == '\\' {
                match self.escape(true)? {
                    Escaped::Char(c) => c,
                    Escaped::Perl(p, negated) => {
                        class.perl.push((p, negated));
                        continue;
                    }
                    Escaped::Boundary(_) => continue,
                }
            } else if c == '[' && self.peek() == Some(':') {
                // POSIX classes such as `[:alpha:]`.
                let rest: String = self.chars[self.pos..].iter().collect();
                let Some(end) = rest.find(":]") else {
                    return Err(format!("missing closing ]: `{}`", self.source));
                };
                let name = &rest[1..end];
                self.pos += rest[..end + 2].chars().count();
                class.ranges.extend(
                    posix_class(name)
                        .ok_or_else(|| format!("invalid character class range: `[:{name}:]`"))?,
                );
                continue;
            } else {
                c
            };
            if self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|n| *n != ']') {
                self.pos += 1;
                let Some(mut high) = self.peek() else {
                    return Err(format!("missing closing ]: `{}`", self.source));
                };
                self.pos += 1;
                if high == '\\' {
                    match self.escape(true)? {
                        Escaped::Char(c) => high = c,
                        _ => {
                            return Err(format!("invalid character class range: `{}`", self.source))
                        }
                    }
                }
                if high < low {
                    return Err(format!("invalid character class range: `{low}-{high}`"));
                }
                class.ranges.push((low, high));
            } else {
                class.ranges.push((low, low));
            }
        }
        Ok(Node::Class(class))
    }
}

fn posix_class(name: &str) -> Option<Vec<(char, char)>> {
    Some(match name {
        "alpha" => vec![('a', 'z'), ('A', 'Z')],
        "digit" => vec![('0', '9')],
        "alnum" => vec![('a', 'z'), ('A', 'Z'), ('0', '9')],
        "lower" => vec![('a', 'z')],
        "upper" => vec![('A', 'Z')],
        "space" => vec![(' ', ' '), ('\t', '\r')],
        "xdigit" => vec![('0', '9'), ('a', 'f'), ('A', 'F')],
        "punct" => vec![('!', '/'), (':', '@'), ('[', '`'), ('{', '~')],
        "word" => vec![('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')],
        _ => return None,
    })
}

enum Escaped {
    Char(char),
    Perl(char, bool),
    Boundary(bool),
}

struct Matcher<'a> {
    input: &'a [char],
    steps: std::cell::Cell<usize>,
}

impl Matcher<'_> {
    fn tick(&self) -> bool {
        let steps = self.steps.get() + 1;
        self.steps.set(steps);
        steps <= STEP_BUDGET
    }

    fn alternatives(
        &self,
        alternatives: &[Vec<Node>],
        pos: usize,
        k: &mut dyn FnMut(usize) -> bool,
    ) -> bool {
        alternatives.iter().any(|seq| self.sequence(seq, pos, k))
    }

    fn sequence(&self, seq: &[Node], pos: usize, k: &mut dyn FnMut(usize) -> bool) -> bool {
        if !self.tick() {
            return false;
        }
        let Some((first, rest)) = seq.split_first() else {
            return k(pos);
        };
        match first {
            Node::Repeat {
                node,
                min,
                max,
                greedy,
            } => {
                let repeat = Repeat {
                    node,
                    min: *min,
                    max: *max,
                    greedy: *greedy,
                };
                self.repeat(&repeat, 0, pos, rest, k)
            }
            Node::Group(alternatives) => {
                self.alternatives(alternatives, pos, &mut |next| self.sequence(rest, next, k))
            }
            single => match self.single(single, pos) {
                Some(next) => self.sequence(rest, next, k),
                None => false,
            },
        }
    }

    /// Matches one non-repeating, non-group node at `pos`; the position after it.
    fn single(&self, node: &Node, pos: usize) -> Option<usize> {
        let c = self.input.get(pos).copied();
        match node {
            Node::Char(want) => (c == Some(*want)).then_some(pos + 1),
            Node::Any => c.filter(|c| *c != '\n').map(|_| pos + 1),
            Node::Class(class) => c.filter(|c| class.matches(*c)).map(|_| pos + 1),
            Node::Start => (pos == 0).then_some(pos),
            Node::End => (pos == self.input.len()).then_some(pos),
            Node::WordBoundary(want) => {
                let word = |i: Option<usize>| {
                    i.and_then(|i| self.input.get(i))
                        .is_some_and(|c| perl_matches('w', *c))
                };
                let at = word(pos.checked_sub(1)) != word(Some(pos));
                (at == *want).then_some(pos)
            }
            Node::Group(_) | Node::Repeat { .. } => None,
        }
    }

    fn repeat(
        &self,
        r: &Repeat<'_>,
        count: usize,
        pos: usize,
        rest: &[Node],
        k: &mut dyn FnMut(usize) -> bool,
    ) -> bool {
        if !self.tick() {
            return false;
        }
        let may_stop = count >= r.min;
        let may_continue = r.max.is_none_or(|m| count < m);
        if !r.greedy && may_stop && self.sequence(rest, pos, k) {
            return true;
        }
        if may_continue {
            let one = std::slice::from_ref(r.node);
            // An empty iteration cannot make progress; stop repeating it.
            let matched = self.sequence(one, pos, &mut |next| {
                next != pos && self.repeat(r, count + 1, next, rest, k)
            });
            if matched {
                return true;
            }
        }
        r.greedy && may_stop && self.sequence(rest, pos, k)
    }
}

struct Repeat<'a> {
    node: &'a Node,
    min: usize,
    max: Option<usize>,
    greedy: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_patterns_match_like_go_regexp() {
        let cases: &[(&str, &str, bool)] = &[
            (r"^(\d+h)?(\d+m)?(\d+s)?$", "1h30m", true),
            (r"^(\d+h)?(\d+m)?(\d+s)?$", "1x", false),
            (r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "my-name", true),
            (r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "-bad", false),
            ("abc", "xxabcxx", true),
            ("^abc$", "xxabc", false),
            ("a|b", "b", true),
            ("^a{2,3}$", "aaa", true),
            ("^a{2,3}$", "aaaa", false),
            ("^a{2}$", "aa", true),
            (r"^\w+@\w+\.com$", "me@x.com", true),
            ("^[^0-9]+$", "abc", true),
            ("^[^0-9]+$", "ab1", false),
            ("^(?:ab)+$", "abab", true),
            (r"^\S+$", "a b", false),
            ("^a.*?b$", "axxb", true),
            (r"^[\w.-]+$", "a.b-c", true),
            ("^(a*)*$", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", false),
            (r"^(\*|[0-9]+)$", "*", true),
            ("[[:digit:]]", "a1", true),
            ("a{,", "a{,", true),
        ];
        for (pattern, text, want) in cases {
            let p = Pattern::new(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            assert_eq!(p.is_match(text), *want, "{pattern} on {text}");
        }
        for bad in ["(ab", "[a-", "a**", "*a", r"\q", "[z-a]"] {
            assert!(Pattern::new(bad).is_err(), "{bad} should not compile");
        }
    }
}
