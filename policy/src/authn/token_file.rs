//! Static bearer tokens from a CSV file (`--token-auth-file`), as kube's `tokenfile` package:
//! one record per line, `token,user,uid[,"group1,group2"]`, parsed with Go `encoding/csv`
//! rules (quoted fields, `""` escapes, empty lines skipped, no comment syntax, extra columns
//! ignored). Unlike kube, which reads the file once at start, the file is re-read when it
//! changes; a broken new version is logged and the previous tokens stay in force.
//!
//! Lookup is by the SHA-256 digest of the presented token rather than a string-keyed map or a
//! scan of every entry: the time a lookup takes then depends on the digest, which an attacker
//! cannot steer towards a valid token byte by byte, so it leaks nothing useful; it stays O(1)
//! for large files; and the digest hit is confirmed with a constant-time comparison.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::bearer::{TokenAuthenticator, TokenOutcome, TokenReviewResult};
use crate::user::UserInfo;

/// How often, at most, a lookup checks whether the file changed.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(1);

type Digest32 = [u8; 32];

fn digest(token: &str) -> Digest32 {
    Sha256::digest(token.as_bytes()).into()
}

/// One parsed version of the file.
#[derive(Debug, Default)]
struct Tokens {
    by_digest: HashMap<Digest32, UserInfo>,
}

/// What identifies the version of the file that was read: a change of any of these means the
/// file must be read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fingerprint {
    modified: Option<SystemTime>,
    len: u64,
}

fn fingerprint(path: &Path) -> std::io::Result<Fingerprint> {
    let meta = std::fs::metadata(path)?;
    Ok(Fingerprint {
        modified: meta.modified().ok(),
        len: meta.len(),
    })
}

struct Current {
    tokens: Arc<Tokens>,
    /// The version last looked at, loaded or not (so a broken file is reported once, not on
    /// every check).
    seen: Option<Fingerprint>,
}

/// Authenticates the tokens listed in a kube static token file.
pub struct TokenFileAuthenticator {
    path: PathBuf,
    reload_interval: Duration,
    current: RwLock<Current>,
    /// When the file was last checked; held while checking so one caller reloads at a time.
    last_check: Mutex<Instant>,
}

impl std::fmt::Debug for TokenFileAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFileAuthenticator")
            .field("path", &self.path)
            .field("tokens", &self.tokens().by_digest.len())
            .finish()
    }
}

impl TokenFileAuthenticator {
    /// Reads and parses the file; any problem is an error naming the file (and the line).
    pub fn load(path: impl AsRef<Path>) -> Result<Self, String> {
        let path = path.as_ref().to_path_buf();
        let seen = fingerprint(&path).ok();
        let tokens = read_tokens(&path)?;
        Ok(TokenFileAuthenticator {
            path,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
            current: RwLock::new(Current {
                tokens: Arc::new(tokens),
                seen,
            }),
            last_check: Mutex::new(Instant::now()),
        })
    }

    /// Changes how often, at most, lookups check the file for changes (zero: on every lookup).
    pub fn with_reload_interval(mut self, interval: Duration) -> Self {
        self.reload_interval = interval;
        self
    }

    /// The path the tokens are read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many distinct tokens are in force.
    pub fn len(&self) -> usize {
        self.tokens().by_digest.len()
    }

    /// Whether no token is in force.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn tokens(&self) -> Arc<Tokens> {
        // A poisoned lock only means another thread panicked mid-swap of an Arc; the value
        // inside is still a complete token set.
        match self.current.read() {
            Ok(current) => current.tokens.clone(),
            Err(poisoned) => poisoned.into_inner().tokens.clone(),
        }
    }

    /// Re-reads the file if it is time to check and it changed. Reading is synchronous: the
    /// file is small and this happens at most once per interval.
    fn maybe_reload(&self) {
        let Ok(mut last_check) = self.last_check.try_lock() else {
            // Someone else is checking right now; use the tokens in force.
            return;
        };
        if last_check.elapsed() < self.reload_interval {
            return;
        }
        *last_check = Instant::now();

        let seen = match self.current.read() {
            Ok(current) => current.seen,
            Err(poisoned) => poisoned.into_inner().seen,
        };
        let now_seen = match fingerprint(&self.path) {
            Ok(f) => Some(f),
            Err(e) => {
                if seen.is_some() {
                    tracing::warn!(path = %self.path.display(), error = %e,
                        "token file cannot be read; keeping the tokens loaded before");
                }
                None
            }
        };
        if now_seen == seen || now_seen.is_none() {
            self.set_seen(now_seen, None);
            return;
        }
        match read_tokens(&self.path) {
            Ok(tokens) => {
                tracing::info!(path = %self.path.display(), tokens = tokens.by_digest.len(),
                    "token file reloaded");
                self.set_seen(now_seen, Some(tokens));
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e,
                    "token file changed but is invalid; keeping the tokens loaded before");
                self.set_seen(now_seen, None);
            }
        }
    }

    fn set_seen(&self, seen: Option<Fingerprint>, tokens: Option<Tokens>) {
        let mut current = match self.current.write() {
            Ok(current) => current,
            Err(poisoned) => poisoned.into_inner(),
        };
        current.seen = seen;
        if let Some(tokens) = tokens {
            current.tokens = Arc::new(tokens);
        }
    }

    fn lookup(&self, token: &str) -> Option<UserInfo> {
        let wanted = digest(token);
        let tokens = self.tokens();
        let (stored, user) = tokens.by_digest.get_key_value(&wanted)?;
        bool::from(stored.ct_eq(&wanted)).then(|| user.clone())
    }
}

#[async_trait::async_trait]
impl TokenAuthenticator for TokenFileAuthenticator {
    fn name(&self) -> &'static str {
        "token-file"
    }

    async fn authenticate_token(&self, token: &str, _audiences: &[String]) -> TokenOutcome {
        self.maybe_reload();
        match self.lookup(token) {
            Some(user) => TokenOutcome::Authenticated(TokenReviewResult {
                user: Arc::new(user),
                audiences: Arc::new([]),
                expires_at: None,
            }),
            None => TokenOutcome::NotMine,
        }
    }
}

fn read_tokens(path: &Path) -> Result<Tokens, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("token file '{}': {e}", path.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("token file '{}' is not valid UTF-8", path.display()))?;
    parse_tokens(&text, &path.display().to_string())
}

/// Builds the token set from the file's text, as kube's `tokenfile.NewCSV`; `name` is used in
/// messages.
fn parse_tokens(text: &str, name: &str) -> Result<Tokens, String> {
    let records = parse_csv(text).map_err(|e| format!("token file '{name}': {e}"))?;
    let mut tokens = Tokens::default();
    for (index, record) in records.iter().enumerate() {
        let record_number = index + 1;
        let fields = &record.fields;
        if fields.len() < 3 {
            return Err(format!(
                "token file '{name}' must have at least 3 columns (token, user name, user uid), \
                 found {} on line {}",
                fields.len(),
                record.line
            ));
        }
        if fields[0].is_empty() {
            tracing::warn!(
                file = name,
                record = record_number,
                line = record.line,
                "empty token has been found in token file"
            );
            continue;
        }
        let user = UserInfo {
            name: fields[1].clone(),
            uid: fields[2].clone(),
            // Go's strings.Split: an empty column is one empty group, as in kube.
            groups: fields
                .get(3)
                .map(|g| g.split(',').map(str::to_string).collect())
                .unwrap_or_default(),
            ..Default::default()
        };
        if tokens.by_digest.insert(digest(&fields[0]), user).is_some() {
            // The later record wins, as in kube; the token itself is never logged.
            tracing::warn!(
                file = name,
                record = record_number,
                line = record.line,
                "duplicate token has been found in token file"
            );
        }
    }
    Ok(tokens)
}

/// One CSV record and the line it starts on (1-based).
#[derive(Debug, PartialEq, Eq)]
struct Record {
    line: usize,
    fields: Vec<String>,
}

/// A CSV reader with Go `encoding/csv` defaults (comma separator, no comment character, no
/// lazy quotes, leading spaces kept, any number of fields per record). `\r\n` line ends count
/// as `\n`; empty lines are skipped. Errors carry Go's wording and positions (1-based line and
/// byte column). One difference: a quoted field still open at the end of the file is an error
/// here, where Go accepts it.
fn parse_csv(text: &str) -> Result<Vec<Record>, String> {
    let normalized = text.replace("\r\n", "\n");
    let mut body = normalized.as_str();
    // Go drops one trailing `\r` before EOF.
    if let Some(stripped) = body.strip_suffix('\r') {
        body = stripped;
    }
    let mut lines: Vec<&str> = body.split('\n').collect();
    if body.ends_with('\n') {
        lines.pop();
    }

    let mut records = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        if lines[index].is_empty() {
            index += 1;
            continue;
        }
        let start_line = index + 1;
        let mut fields = Vec::new();
        let mut rest: &str = lines[index];
        let mut column = 1usize;
        loop {
            let Some(after_quote) = rest.strip_prefix('"') else {
                let (field, more) = match rest.find(',') {
                    Some(at) => (&rest[..at], Some(&rest[at + 1..])),
                    None => (rest, None),
                };
                if let Some(at) = field.find('"') {
                    return Err(csv_error(
                        start_line,
                        index + 1,
                        column + at,
                        "bare \" in non-quoted field",
                    ));
                }
                fields.push(field.to_string());
                match more {
                    Some(more) => {
                        column += field.len() + 1;
                        rest = more;
                        continue;
                    }
                    None => break,
                }
            };
            // Quoted field: may hold commas, `""` for a quote, and line breaks.
            let mut value = String::new();
            let mut inside = after_quote;
            column += 1;
            let record_ended = loop {
                let Some(at) = inside.find('"') else {
                    value.push_str(inside);
                    if index + 1 >= lines.len() {
                        return Err(csv_error(
                            start_line,
                            index + 1,
                            column + inside.len(),
                            "extraneous or missing \" in quoted field",
                        ));
                    }
                    value.push('\n');
                    index += 1;
                    inside = lines[index];
                    column = 1;
                    continue;
                };
                value.push_str(&inside[..at]);
                let after = &inside[at + 1..];
                column += at + 1;
                if let Some(more) = after.strip_prefix('"') {
                    value.push('"');
                    inside = more;
                    column += 1;
                } else if let Some(more) = after.strip_prefix(',') {
                    rest = more;
                    column += 1;
                    break false;
                } else if after.is_empty() {
                    break true;
                } else {
                    return Err(csv_error(
                        start_line,
                        index + 1,
                        column,
                        "extraneous or missing \" in quoted field",
                    ));
                }
            };
            fields.push(value);
            if record_ended {
                break;
            }
        }
        records.push(Record {
            line: start_line,
            fields,
        });
        index += 1;
    }
    Ok(records)
}

fn csv_error(start_line: usize, line: usize, column: usize, message: &str) -> String {
    if start_line != line {
        format!(
            "record on line {start_line}; parse error on line {line}, column {column}: {message}"
        )
    } else {
        format!("parse error on line {line}, column {column}: {message}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn fields(text: &str) -> Vec<Vec<String>> {
        parse_csv(text)
            .expect("valid csv")
            .into_iter()
            .map(|r| r.fields)
            .collect()
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn csv_follows_go_rules() {
        assert_eq!(
            fields("a,b,c\n\n\r\nd,e,f,\"g1,g2\"\r\n"),
            vec![v(&["a", "b", "c"]), v(&["d", "e", "f", "g1,g2"])]
        );
        assert_eq!(fields("a,\"b\"\"q\",c,"), vec![v(&["a", "b\"q", "c", ""])]);
        assert_eq!(
            fields("\"multi\nline\",u,1"),
            vec![v(&["multi\nline", "u", "1"])]
        );
        assert_eq!(
            fields(" a , b,c"),
            vec![v(&[" a ", " b", "c"])],
            "spaces are kept"
        );
        assert_eq!(
            fields("# not a comment,u,1"),
            vec![v(&["# not a comment", "u", "1"])]
        );
        assert_eq!(fields("\"\",\"\",\"\""), vec![v(&["", "", ""])]);
        assert_eq!(fields("a,b,c\r"), vec![v(&["a", "b", "c"])]);
        assert!(fields("").is_empty());

        let lines: Vec<usize> = parse_csv("\na,b,c\n\"x\ny\",1,2\nd,e,f")
            .expect("valid")
            .iter()
            .map(|r| r.line)
            .collect();
        assert_eq!(lines, vec![2, 3, 5]);
    }

    #[test]
    fn csv_errors_have_positions() {
        assert_eq!(
            parse_csv("a,b,c\nto\"ken,u,1").expect_err("bare quote"),
            "parse error on line 2, column 3: bare \" in non-quoted field"
        );
        assert_eq!(
            parse_csv("a,b,c\n\"tok\"x,u,1").expect_err("junk after quote"),
            "parse error on line 2, column 6: extraneous or missing \" in quoted field"
        );
        assert_eq!(
            parse_csv("a,b,c\n\"open\nstill open").expect_err("unterminated"),
            "record on line 2; parse error on line 3, column 11: extraneous or missing \" in quoted field"
        );
    }

    fn parse(text: &str) -> Result<Tokens, String> {
        parse_tokens(text, "tokens.csv")
    }

    fn user_of(tokens: &Tokens, token: &str) -> Option<UserInfo> {
        tokens.by_digest.get(&digest(token)).cloned()
    }

    #[test]
    fn token_records() {
        let tokens = parse(
            "t1,alice,uid-1\n\
             t2,bob,uid-2,\"dev,ops\"\n\
             t3,carol,uid-3,single,ignored-extra\n\
             ,nobody,uid-4\n\
             t1,alice2,uid-5\n\
             t6,empty-groups,uid-6,\n",
        )
        .expect("valid");
        assert_eq!(
            tokens.by_digest.len(),
            4,
            "empty token skipped, duplicate replaced"
        );
        assert_eq!(
            user_of(&tokens, "t1"),
            Some(UserInfo {
                name: "alice2".into(),
                uid: "uid-5".into(),
                ..Default::default()
            }),
            "the later duplicate wins, as in kube"
        );
        assert_eq!(
            user_of(&tokens, "t2").map(|u| u.groups),
            Some(v(&["dev", "ops"]))
        );
        assert_eq!(
            user_of(&tokens, "t3").map(|u| u.groups),
            Some(v(&["single"]))
        );
        assert_eq!(
            user_of(&tokens, "t6").map(|u| u.groups),
            Some(v(&[""])),
            "kube splits an empty column into one empty group"
        );
        assert_eq!(user_of(&tokens, ""), None);
    }

    #[test]
    fn missing_columns_name_the_line() {
        assert_eq!(
            parse("t1,alice,uid-1\n\nt2,bob\n").err(),
            Some(
                "token file 'tokens.csv' must have at least 3 columns (token, user name, user \
                 uid), found 2 on line 3"
                    .to_string()
            )
        );
        assert!(parse("t1,alice,uid\n\"x\",\"y\"")
            .err()
            .is_some_and(|e| e.contains("on line 2")));
        assert!(parse("t1,a\"b,c")
            .err()
            .is_some_and(|e| e.starts_with("token file 'tokens.csv': parse error on line 1")));
    }

    fn write(path: &Path, text: &str, modified: SystemTime) {
        let mut file = std::fs::File::create(path).expect("create");
        file.write_all(text.as_bytes()).expect("write");
        file.set_modified(modified).expect("set mtime");
    }

    async fn who(auth: &TokenFileAuthenticator, token: &str) -> Option<String> {
        match auth.authenticate_token(token, &[]).await {
            TokenOutcome::Authenticated(r) => Some(r.user.name.clone()),
            TokenOutcome::NotMine => None,
            TokenOutcome::Invalid(e) => panic!("token file never says Invalid: {e}"),
        }
    }

    #[tokio::test]
    async fn authenticates_and_reloads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.csv");
        let t0 = SystemTime::now() - Duration::from_secs(100);
        write(&path, "secret-a,alice,1,\"g1,g2\"\n", t0);

        let auth = TokenFileAuthenticator::load(&path)
            .expect("load")
            .with_reload_interval(Duration::ZERO);
        match auth.authenticate_token("secret-a", &["api".into()]).await {
            TokenOutcome::Authenticated(r) => {
                assert_eq!(r.user.name, "alice");
                assert_eq!(r.user.uid, "1");
                assert_eq!(r.user.groups, v(&["g1", "g2"]));
                assert!(r.audiences.is_empty());
                assert_eq!(r.expires_at, None);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(who(&auth, "secret-b").await, None);
        assert_eq!(who(&auth, "secret-").await, None, "prefixes do not match");
        assert_eq!(who(&auth, "secret-aa").await, None);

        // A new version replaces the tokens.
        write(&path, "secret-b,bob,2\n", t0 + Duration::from_secs(10));
        assert_eq!(who(&auth, "secret-b").await.as_deref(), Some("bob"));
        assert_eq!(who(&auth, "secret-a").await, None);

        // A broken version is ignored: the previous tokens stay.
        write(&path, "secret-c,carol\n", t0 + Duration::from_secs(20));
        assert_eq!(who(&auth, "secret-b").await.as_deref(), Some("bob"));
        assert_eq!(who(&auth, "secret-c").await, None);

        // The file disappearing keeps them too.
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(who(&auth, "secret-b").await.as_deref(), Some("bob"));

        // A fixed version is picked up.
        write(&path, "secret-c,carol,3\n", t0 + Duration::from_secs(30));
        assert_eq!(who(&auth, "secret-c").await.as_deref(), Some("carol"));
        assert_eq!(auth.len(), 1);
    }

    #[tokio::test]
    async fn reload_checks_are_rate_limited() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tokens.csv");
        let t0 = SystemTime::now() - Duration::from_secs(100);
        write(&path, "secret-a,alice,1\n", t0);
        let auth = TokenFileAuthenticator::load(&path)
            .expect("load")
            .with_reload_interval(Duration::from_millis(300));
        write(&path, "secret-b,bob,2\n", t0 + Duration::from_secs(1));
        assert_eq!(
            who(&auth, "secret-a").await.as_deref(),
            Some("alice"),
            "not yet checked"
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(who(&auth, "secret-b").await.as_deref(), Some("bob"));
    }

    #[test]
    fn load_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("absent.csv");
        assert!(TokenFileAuthenticator::load(&missing)
            .err()
            .is_some_and(|e| e.contains("absent.csv")));
        let bad = dir.path().join("bad.csv");
        std::fs::write(&bad, "a,b,c\nshort\n").expect("write");
        assert!(TokenFileAuthenticator::load(&bad)
            .err()
            .is_some_and(|e| e.contains("found 1 on line 2")));
        let debug = format!(
            "{:?}",
            TokenFileAuthenticator::load({
                std::fs::write(&bad, "hidden-token,u,1\n").expect("write");
                &bad
            })
            .expect("load")
        );
        assert!(!debug.contains("hidden-token"));
    }
}
