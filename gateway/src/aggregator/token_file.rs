//! A bearer token kubegate sends to a backend, read from a file and read again as client-go
//! reads `tokenFile` (its cached file token source): at most once a minute, so a rotated
//! token (a projected ServiceAccount token, one a sidecar refreshes) is used without a
//! restart, and a file that cannot be read keeps the last good token.

use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use kubegate_policy::throttle::Throttled;

/// client-go's period for re-reading a token file.
pub const REREAD_PERIOD: Duration = Duration::from_secs(60);

/// `Authorization: Bearer <token>` from a file.
pub struct TokenFile {
    path: PathBuf,
    current: RwLock<http::HeaderValue>,
    /// Read again at most once per [`REREAD_PERIOD`].
    reread: Throttled<()>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the token.
        f.debug_struct("TokenFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TokenFile {
    /// Reads the file once; an error names it and says what is wrong.
    pub fn load(path: &Path) -> Result<TokenFile, String> {
        Ok(TokenFile {
            path: path.to_path_buf(),
            current: RwLock::new(read_header(path)?),
            reread: Throttled::new(REREAD_PERIOD, ()),
        })
    }

    /// Changes how often the file is read again (tests use zero).
    #[cfg(test)]
    pub fn with_period(mut self, period: Duration) -> TokenFile {
        self.reread.set_interval(period);
        self
    }

    /// The header value to send now (marked sensitive, so it is never logged), after reading
    /// the file again if the period has passed. Callers never wait for each other's read.
    pub fn header(&self) -> http::HeaderValue {
        self.reread.when_due(|()| self.reread_now());
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn reread_now(&self) {
        match read_header(&self.path) {
            Ok(value) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = value;
            }
            Err(error) => tracing::warn!(%error, "keeping the token read before"),
        }
    }
}

fn read_header(path: &Path) -> Result<http::HeaderValue, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("token file {}: {e}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("token file {}: empty", path.display()));
    }
    let mut value = http::HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| format!("token file {}: not a valid token", path.display()))?;
    value.set_sensitive(true);
    Ok(value)
}

#[cfg(test)]
// Tests may unwrap: a panic is the failure report.
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_rotated_token_is_sent_and_an_unreadable_file_keeps_the_last_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "first\n").unwrap();
        let token = TokenFile::load(&path).unwrap();
        assert_eq!(token.header(), "Bearer first");
        assert!(token.header().is_sensitive());
        // Within the period the file is not read again.
        std::fs::write(&path, "second\n").unwrap();
        assert_eq!(token.header(), "Bearer first");
        let token = token.with_period(Duration::ZERO);
        assert_eq!(token.header(), "Bearer second");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(token.header(), "Bearer second");
        std::fs::write(&path, "  \n").unwrap();
        assert_eq!(token.header(), "Bearer second");
        assert!(format!("{token:?}").contains("token") && !format!("{token:?}").contains("second"));
        let err = TokenFile::load(&path).unwrap_err();
        assert!(err.ends_with(": empty"), "{err}");
    }
}
