//! Go's `net/url` (Go 1.23), as far as kube's URL library observes it: `Parse` and
//! `ParseRequestURI` with their error texts (`parse "x": missing protocol scheme`), and the
//! `Hostname`, `Port`, `EscapedPath`, `Query` and `String` of the result. Works on bytes as
//! Go does; decoded bytes that are not UTF-8 are replaced when handed to CEL.

use super::netip::go_quote;

/// `url.URL`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Url {
    pub scheme: String,
    pub opaque: String,
    /// The user name and, when one is given, the password.
    pub user: Option<(Vec<u8>, Option<Vec<u8>>)>,
    pub host: Vec<u8>,
    pub path: Vec<u8>,
    pub raw_path: String,
    pub force_query: bool,
    pub raw_query: String,
    pub fragment: Vec<u8>,
    pub raw_fragment: String,
}

/// The component being escaped or unescaped (Go's `encoding`).
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => {
            return match mode {
                Mode::Path => c == b'?',
                Mode::UserPassword => matches!(c, b'@' | b'/' | b'?' | b':'),
                Mode::QueryComponent => true,
                Mode::Fragment => false,
                // Host and zone fall through to "everything else".
                Mode::Host | Mode::Zone => true,
            };
        }
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

/// `unescape`, with `EscapeError` and `InvalidHostError` texts.
fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, String> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                if i + 2 >= s.len()
                    || !s[i + 1].is_ascii_hexdigit()
                    || !s[i + 2].is_ascii_hexdigit()
                {
                    let bad = &s[i..(i + 3).min(s.len())];
                    return Err(format!("invalid URL escape {}", go_quote(&text(bad))));
                }
                let escape = &s[i..i + 3];
                if mode == Mode::Host && unhex(s[i + 1]) < 8 && escape != b"%25" {
                    return Err(format!("invalid URL escape {}", go_quote(&text(escape))));
                }
                if mode == Mode::Zone {
                    let v = unhex(s[i + 1]) << 4 | unhex(s[i + 2]);
                    if escape != b"%25" && v != b' ' && should_escape(v, Mode::Host) {
                        return Err(format!("invalid URL escape {}", go_quote(&text(escape))));
                    }
                }
                i += 3;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!(
                        "invalid character {} in host name",
                        go_quote(&text(&[c]))
                    ));
                }
                i += 1;
            }
        }
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                out.push(unhex(s[i + 1]) << 4 | unhex(s[i + 2]));
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

/// `escape`.
fn escape(s: &[u8], mode: Mode) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(s.len());
    for &c in s {
        if c == b' ' && mode == Mode::QueryComponent {
            out.push(b'+');
        } else if should_escape(c, mode) {
            out.extend_from_slice(&[b'%', HEX[usize::from(c >> 4)], HEX[usize::from(c & 15)]]);
        } else {
            out.push(c);
        }
    }
    // Every byte that is not ASCII was escaped.
    String::from_utf8_lossy(&out).into_owned()
}

/// `getScheme`: the scheme before `:`, if the text starts with one.
fn get_scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// `parse`: the URL without its fragment; `via_request` for `ParseRequestURI`.
fn parse_inner(raw: &str, via_request: bool) -> Result<Url, String> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    if raw.is_empty() && via_request {
        return Err("empty url".into());
    }
    let mut url = Url::default();
    if raw == "*" {
        url.path = b"*".to_vec();
        return Ok(url);
    }
    let (scheme, mut rest) = get_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        url.force_query = true;
        rest = &rest[..rest.len() - 1];
    } else if let Some((before, query)) = rest.split_once('?') {
        url.raw_query = query.to_string();
        rest = before;
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // A rootless path is opaque (RFC 3986).
            url.opaque = rest.to_string();
            return Ok(url);
        }
        if via_request {
            return Err("invalid URI for request".into());
        }
        let segment = rest.split('/').next().unwrap_or_default();
        if segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///"))
        && rest.starts_with("//")
    {
        let after = &rest[2..];
        let (authority, path) = match after.find('/') {
            Some(i) => (&after[..i], &after[i..]),
            None => (after, ""),
        };
        let (user, host) = parse_authority(authority)?;
        url.user = user;
        url.host = host;
        rest = path;
    }
    set_path(&mut url, rest)?;
    Ok(url)
}

type UserInfo = Option<(Vec<u8>, Option<Vec<u8>>)>;

fn parse_authority(authority: &str) -> Result<(UserInfo, Vec<u8>), String> {
    let at = authority.rfind('@');
    let host = parse_host(match at {
        Some(i) => &authority[i + 1..],
        None => authority,
    })?;
    let Some(at) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..at];
    let valid = userinfo.chars().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                '-' | '.'
                    | '_'
                    | ':'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | '%'
                    | '@'
            )
    });
    if !valid {
        return Err("net/url: invalid userinfo".into());
    }
    let user = match userinfo.split_once(':') {
        None => (unescape(userinfo.as_bytes(), Mode::UserPassword)?, None),
        Some((name, password)) => (
            unescape(name.as_bytes(), Mode::UserPassword)?,
            Some(unescape(password.as_bytes(), Mode::UserPassword)?),
        ),
    };
    Ok((Some(user), host))
}

/// `validOptionalPort`: empty, or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
}

/// `parseHost`: `host[:port]`, an IP literal in brackets possibly with a `%25` zone.
fn parse_host(host: &str) -> Result<Vec<u8>, String> {
    if host.starts_with('[') {
        let Some(close) = host.rfind(']') else {
            return Err("missing ']' in host".into());
        };
        let colon_port = &host[close + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", go_quote(colon_port)));
        }
        if let Some(zone) = host[..close].find("%25") {
            let mut out = unescape(&host.as_bytes()[..zone], Mode::Host)?;
            out.extend(unescape(&host.as_bytes()[zone..close], Mode::Zone)?);
            out.extend(unescape(&host.as_bytes()[close..], Mode::Host)?);
            return Ok(out);
        }
    } else if let Some(colon) = host.rfind(':') {
        let colon_port = &host[colon..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", go_quote(colon_port)));
        }
    }
    unescape(host.as_bytes(), Mode::Host)
}

/// `setPath`: the decoded path, and the raw one when it is not the default encoding.
fn set_path(url: &mut Url, escaped: &str) -> Result<(), String> {
    url.path = unescape(escaped.as_bytes(), Mode::Path)?;
    url.raw_path = if escape(&url.path, Mode::Path) == escaped {
        String::new()
    } else {
        escaped.to_string()
    };
    Ok(())
}

/// `validEncoded`: nothing in `s` would need escaping in `mode`.
fn valid_encoded(s: &str, mode: Mode) -> bool {
    s.bytes().all(|c| {
        matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'@'
                | b'['
                | b']'
                | b'%'
        ) || !should_escape(c, mode)
    })
}

/// `url.Error` for `op "url": err`.
fn url_error(url: &str, err: String) -> String {
    format!("parse {}: {err}", go_quote(url))
}

/// `url.ParseRequestURI`: an absolute URI or an absolute path, no fragment.
pub fn parse_request_uri(raw: &str) -> Result<Url, String> {
    parse_inner(raw, true).map_err(|err| url_error(raw, err))
}

/// `url.Parse`: any URL reference, fragment included.
pub fn parse(raw: &str) -> Result<Url, String> {
    let (without_fragment, fragment) = match raw.split_once('#') {
        Some((u, f)) => (u, Some(f)),
        None => (raw, None),
    };
    let mut url =
        parse_inner(without_fragment, false).map_err(|err| url_error(without_fragment, err))?;
    if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
        url.fragment =
            unescape(fragment.as_bytes(), Mode::Fragment).map_err(|err| url_error(raw, err))?;
        url.raw_fragment = if escape(&url.fragment, Mode::Fragment) == fragment {
            String::new()
        } else {
            fragment.to_string()
        };
    }
    Ok(url)
}

/// `splitHostPort`: host (brackets removed) and numeric port.
fn split_host_port(host_port: &[u8]) -> (&[u8], &[u8]) {
    let mut host = host_port;
    let mut port: &[u8] = b"";
    if let Some(colon) = host.iter().rposition(|&b| b == b':') {
        let candidate = &host[colon..];
        if candidate[1..].iter().all(u8::is_ascii_digit) {
            port = &host[colon + 1..];
            host = &host[..colon];
        }
    }
    if host.len() >= 2 && host.starts_with(b"[") && host.ends_with(b"]") {
        host = &host[1..host.len() - 1];
    }
    (host, port)
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Url {
    pub fn host(&self) -> String {
        lossy(&self.host)
    }

    /// `Hostname`: the host without port and brackets.
    pub fn hostname(&self) -> String {
        lossy(split_host_port(&self.host).0)
    }

    /// `Port`: the numeric port, or empty.
    pub fn port(&self) -> String {
        lossy(split_host_port(&self.host).1)
    }

    /// `EscapedPath`: the raw path when it is a valid encoding of the path, else the path
    /// escaped.
    pub fn escaped_path(&self) -> String {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, Mode::Path)
            && unescape(self.raw_path.as_bytes(), Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == b"*" {
            return "*".into();
        }
        escape(&self.path, Mode::Path)
    }

    fn escaped_fragment(&self) -> String {
        if !self.raw_fragment.is_empty()
            && valid_encoded(&self.raw_fragment, Mode::Fragment)
            && unescape(self.raw_fragment.as_bytes(), Mode::Fragment)
                .is_ok_and(|f| f == self.fragment)
        {
            return self.raw_fragment.clone();
        }
        escape(&self.fragment, Mode::Fragment)
    }

    /// `Query`: the query's keys and their values in order, malformed pairs dropped.
    pub fn query(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (Ok(key), Ok(value)) = (
                unescape(key.as_bytes(), Mode::QueryComponent),
                unescape(value.as_bytes(), Mode::QueryComponent),
            ) else {
                continue;
            };
            let (key, value) = (lossy(&key), lossy(&value));
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, values)) => values.push(value),
                None => out.push((key, vec![value])),
            }
        }
        out
    }

    /// `String`: the URL reassembled (what kube's URL equality compares).
    pub fn to_go_string(&self) -> String {
        let mut out = String::new();
        if !self.scheme.is_empty() {
            out.push_str(&self.scheme);
            out.push(':');
        }
        if !self.opaque.is_empty() {
            out.push_str(&self.opaque);
        } else {
            if !self.scheme.is_empty() || !self.host.is_empty() || self.user.is_some() {
                if !self.host.is_empty() || !self.path.is_empty() || self.user.is_some() {
                    out.push_str("//");
                }
                if let Some((name, password)) = &self.user {
                    out.push_str(&escape(name, Mode::UserPassword));
                    if let Some(password) = password {
                        out.push(':');
                        out.push_str(&escape(password, Mode::UserPassword));
                    }
                    out.push('@');
                }
                out.push_str(&escape(&self.host, Mode::Host));
            }
            let path = self.escaped_path();
            if !path.is_empty() && !path.starts_with('/') && !self.host.is_empty() {
                out.push('/');
            }
            if out.is_empty() && path.split('/').next().is_some_and(|s| s.contains(':')) {
                out.push_str("./");
            }
            out.push_str(&path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            out.push('?');
            out.push_str(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            out.push('#');
            out.push_str(&self.escaped_fragment());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_uris_parse_or_fail_as_go_does() {
        for (input, want) in [
            ("https://kube.io", Ok("https://kube.io")),
            (
                "https://kube.io:8443/a%20b?x=1#f",
                Ok("https://kube.io:8443/a%20b?x=1#f"),
            ),
            ("/absolute/path", Ok("/absolute/path")),
            (
                "mailto:someone@example.com",
                Ok("mailto:someone@example.com"),
            ),
            ("*", Ok("*")),
            ("", Err(r#"parse "": empty url"#)),
            (
                "../relative",
                Err(r#"parse "../relative": invalid URI for request"#),
            ),
            (
                "kube.io",
                Err(r#"parse "kube.io": invalid URI for request"#),
            ),
            (":80", Err(r#"parse ":80": missing protocol scheme"#)),
            (
                "http://a b.com/",
                Err(r#"parse "http://a b.com/": invalid character " " in host name"#),
            ),
            (
                "http://host:8x/",
                Err(r#"parse "http://host:8x/": invalid port ":8x" after host"#),
            ),
            (
                "http://[::1/",
                Err(r#"parse "http://[::1/": missing ']' in host"#),
            ),
            (
                "http://x/%zz",
                Err(r#"parse "http://x/%zz": invalid URL escape "%zz""#),
            ),
            (
                "http://x/\n",
                Err("parse \"http://x/\\n\": net/url: invalid control character in URL"),
            ),
            (
                "http://us er@x/",
                Err(r#"parse "http://us er@x/": net/url: invalid userinfo"#),
            ),
        ] {
            let got = parse_request_uri(input).map(|u| u.to_go_string());
            assert_eq!(got.as_deref().map_err(String::as_str), want, "{input}");
        }
        // Parse takes the fragment apart, which ParseRequestURI leaves in the path or query.
        let url = parse("https://kube.io/p?q=1#frag").expect("url");
        assert_eq!(
            (url.raw_query.as_str(), url.fragment.as_slice()),
            ("q=1", b"frag".as_slice())
        );
        assert_eq!(
            parse("a:b#%zz").map(|u| u.to_go_string()),
            Err(r#"parse "a:b#%zz": invalid URL escape "%zz""#.to_string())
        );
    }

    #[test]
    fn components_are_read_as_go_reads_them() {
        let url = |s: &str| parse(s).expect(s);
        let u = url("https://user:pw@[::1]:8443/a%2Fb/c?k=v1&k=v2&x=&bad=%zz&s;=1&=e#top");
        assert_eq!(u.scheme, "https");
        assert_eq!(u.host(), "[::1]:8443");
        assert_eq!(u.hostname(), "::1");
        assert_eq!(u.port(), "8443");
        assert_eq!(u.escaped_path(), "/a%2Fb/c");
        // A raw path that is no valid encoding is ignored: the path is escaped anew.
        assert_eq!(url("https://x.io/a%2Fb/c d").escaped_path(), "/a/b/c%20d");
        assert_eq!(
            u.query(),
            vec![
                ("k".to_string(), vec!["v1".to_string(), "v2".to_string()]),
                ("x".to_string(), vec![String::new()]),
                (String::new(), vec!["e".to_string()]),
            ]
        );
        let plain = url("https://example.com:80/");
        assert_eq!(
            (plain.hostname(), plain.port()),
            ("example.com".to_string(), "80".to_string())
        );
        let no_port = url("https://example.com:/");
        assert_eq!(
            (no_port.hostname(), no_port.port()),
            ("example.com".to_string(), String::new())
        );
        assert_eq!(url("HTTPS://X.io").scheme, "https");
        assert_eq!(
            url("https://x.io/a+b?q=a+b").query()[0].1,
            vec!["a b".to_string()]
        );
        assert_eq!(url("https://x.io/a+b").escaped_path(), "/a+b");
    }
}
