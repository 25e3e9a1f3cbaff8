//! A caching wrapper for token authenticators, as kube's `authentication/token/cache`: results
//! are remembered for a success TTL or a failure TTL so remote checks (webhooks, OIDC) and
//! storage lookups are not repeated on every request, and concurrent checks of the same token
//! share one call to the wrapped authenticator.
//!
//! Cache keys are a salted SHA-256 of the audiences and the token, never the token itself, so
//! memory (or a debug dump of the cache) does not hold usable credentials. A cached success is
//! never served past the token's own `expires_at`.
//!
//! A hit is the common case (every request of a client re-presents the same token), so it is
//! answered from a small direct-mapped table of recently used entries before moka is asked:
//! one slot lookup under an uncontended lock, instead of moka's hashing, read recording and
//! housekeeping. Moka stays the store of record (capacity, miss coalescing); the table only
//! holds clones of its entries and never serves one past the deadline moka expires it at.
//!
//! A connection may also keep a [`TokenMemo`]: the last token it presented and the entry that
//! answered it. A client presents the same token on every request of a keep-alive connection,
//! and comparing it with the remembered one costs far less than hashing it again (~0.8 µs for
//! a ~1 KiB JWT, ~3 % of a cached GET). The memo holds the token itself, as the connection's
//! read buffer did, for the connection's life at most: it is compared in constant time,
//! wiped when replaced or dropped, answers only the connection that filled it, and never
//! serves an entry past its deadline or its token's expiry.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

use super::bearer::{TokenAuthenticator, TokenOutcome, TokenReviewResult};
use crate::user::UserInfo;

/// Upper bound on remembered tokens; kube's striped cache holds 32 × 4096 entries.
const MAX_ENTRIES: u64 = 32 * 4096;

/// Slots in the table of recently used entries (about 48 bytes each). Tokens whose keys share
/// a slot take turns in it; the loser of a turn is still answered by moka.
const RECENT_SLOTS: usize = 2048;

type Key = [u8; 32];

/// A remembered outcome and how long it may be remembered (decided when it was stored).
#[derive(Debug)]
struct Entry {
    outcome: TokenOutcome,
    ttl: Duration,
    /// When the entry was made plus `ttl`: the table of recent entries stops serving it here,
    /// no later than moka (which starts the same TTL when the entry is inserted, just after).
    deadline: Instant,
}

impl Entry {
    fn new(outcome: TokenOutcome, ttl: Duration) -> Self {
        // Every use of an authenticated outcome adds `system:authenticated` (kube's
        // `AuthenticatedGroupAdder`, idempotent): adding it once here spares each hit a copy of
        // the group list to grow it.
        let outcome = match outcome {
            TokenOutcome::Authenticated(result) => TokenOutcome::Authenticated(TokenReviewResult {
                user: UserInfo::shared_with_authenticated_group(result.user),
                ..result
            }),
            other => other,
        };
        Entry {
            outcome,
            ttl,
            deadline: Instant::now() + ttl,
        }
    }

    /// Whether the entry may still be served: moka expires it on its monotonic clock, but a
    /// success is also re-checked against the wall clock its `expires_at` is written in.
    fn usable(&self, now: SystemTime) -> bool {
        match &self.outcome {
            TokenOutcome::Authenticated(result) => result.expires_at.is_none_or(|at| at > now),
            _ => true,
        }
    }
}

/// One slot of the table of recent entries.
struct RecentEntry {
    key: Key,
    entry: Arc<Entry>,
}

/// A direct-mapped table of entries recently served or stored, consulted before moka. Keys
/// are SHA-256 outputs under a secret salt, so their first bytes are a uniform slot index
/// that others cannot aim at one slot.
struct RecentEntries {
    slots: Box<[Mutex<Option<RecentEntry>>]>,
}

impl RecentEntries {
    fn new() -> Self {
        RecentEntries {
            slots: (0..RECENT_SLOTS).map(|_| Mutex::new(None)).collect(),
        }
    }

    fn slot(&self, key: &Key) -> &Mutex<Option<RecentEntry>> {
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&key[..8]);
        // The modulo keeps the index in range whatever the table size.
        &self.slots[(u64::from_le_bytes(prefix) % self.slots.len() as u64) as usize]
    }

    /// The live entry stored under `key`, if the slot holds it. A poisoned lock only means
    /// another thread panicked between two plain assignments; the slot is still consistent.
    fn get(&self, key: &Key, now: Instant) -> Option<Arc<Entry>> {
        let slot = self
            .slot(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let recent = slot.as_ref()?;
        // Keys are digests of secrets: compared in constant time like the secrets themselves.
        (bool::from(recent.key.ct_eq(key)) && now < recent.entry.deadline)
            .then(|| recent.entry.clone())
    }

    fn put(&self, key: Key, entry: Arc<Entry>) {
        *self
            .slot(&key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(RecentEntry { key, entry });
    }

    /// Empties the slot if it holds `key` (its entry turned out stale).
    fn forget(&self, key: &Key) {
        let mut slot = self
            .slot(key)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot
            .as_ref()
            .is_some_and(|recent| bool::from(recent.key.ct_eq(key)))
        {
            *slot = None;
        }
    }
}

/// What one connection remembers of the last bearer token it presented; see the module
/// documentation. Give each connection its own and pass it with every request of that
/// connection (its lock is held for one comparison; HTTP/2 streams of a connection share it).
#[derive(Default)]
pub struct TokenMemo {
    last: Mutex<Option<Remembered>>,
}

impl std::fmt::Debug for TokenMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenMemo").finish_non_exhaustive()
    }
}

struct Remembered {
    /// The cache that answered ([`CachedTokenAuthenticator::id`]).
    cache: u64,
    audiences: Vec<String>,
    /// Wiped when the memo is replaced or dropped.
    token: Zeroizing<Vec<u8>>,
    entry: Arc<Entry>,
}

impl TokenMemo {
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Remembered>> {
        // A poisoned lock only means a panic between two assignments; the slot is whole.
        self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The remembered outcome, if the token `bearer` starts with (up to its first space) and
    /// `audiences` are what cache `cache` answered last on this connection and its entry may
    /// still be served.
    fn recall(&self, cache: u64, bearer: &[u8], audiences: &[String]) -> Option<TokenOutcome> {
        let mut last = self.slot();
        let remembered = last.as_ref()?;
        // A remembered token holds no space, so `bearer`'s token is that long exactly when
        // its bytes up to there equal the remembered ones and a space or the end follows.
        let length = remembered.token.len();
        let ends_there = bearer.get(length).is_none_or(|b| *b == b' ');
        if remembered.cache != cache
            || remembered.audiences[..] != *audiences
            || !ends_there
            || !bearer
                .get(..length)
                .is_some_and(|token| equal_in_constant_time(&remembered.token, token))
        {
            return None;
        }
        let entry = &remembered.entry;
        if Instant::now() < entry.deadline && entry.usable(SystemTime::now()) {
            return Some(entry.outcome.clone());
        }
        *last = None;
        None
    }

    fn remember(&self, cache: u64, token: &str, audiences: &[String], entry: Arc<Entry>) {
        *self.slot() = Some(Remembered {
            cache,
            audiences: audiences.to_vec(),
            token: Zeroizing::new(token.as_bytes().to_vec()),
            entry,
        });
    }
}

/// Whether `a` equals `b`, in a time that depends on their length only, not on where they
/// differ (kube's `subtle.ConstantTimeCompare` also answers a length mismatch at once).
/// `subtle`'s slice comparison guards every byte separately, ~10 instructions a byte; this
/// folds the differences 64 bytes at a time into four 16-byte lanes (vector registers on
/// x86-64), with no branch on the data.
fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (a_blocks, a_rest) = a.as_chunks::<64>();
    let (b_blocks, b_rest) = b.as_chunks::<64>();
    let mut lanes = [0u128; 4];
    for (x, y) in a_blocks.iter().zip(b_blocks) {
        let (xs, _) = x.as_chunks::<16>();
        let (ys, _) = y.as_chunks::<16>();
        for ((lane, x), y) in lanes.iter_mut().zip(xs).zip(ys) {
            *lane |= u128::from_ne_bytes(*x) ^ u128::from_ne_bytes(*y);
        }
    }
    let mut difference = lanes.iter().fold(0, |all, lane| all | lane);
    let (a_words, a_bytes) = a_rest.as_chunks::<8>();
    let (b_words, b_bytes) = b_rest.as_chunks::<8>();
    for (x, y) in a_words.iter().zip(b_words) {
        difference |= u128::from(u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y));
    }
    for (x, y) in a_bytes.iter().zip(b_bytes) {
        difference |= u128::from(x ^ y);
    }
    std::hint::black_box(difference) == 0
}

/// Gives every entry the TTL chosen when it was stored.
struct PerEntryTtl;

impl moka::Expiry<Key, Arc<Entry>> for PerEntryTtl {
    fn expire_after_create(
        &self,
        _key: &Key,
        value: &Arc<Entry>,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

/// Remembers the outcomes of a token authenticator; see the module documentation.
pub struct CachedTokenAuthenticator {
    inner: Arc<dyn TokenAuthenticator>,
    /// Random, so that a [`TokenMemo`] filled by one cache is never answered by another (not
    /// even by one later allocated at the same address).
    id: u64,
    success_ttl: Duration,
    failure_ttl: Duration,
    /// Per-instance random salt for the key hash (kube keys with an HMAC under a random key),
    /// so a key seen in memory cannot be checked against guessed tokens offline.
    salt: [u8; 32],
    cache: moka::future::Cache<Key, Arc<Entry>>,
    /// Answers repeated hits without going through moka; see the module documentation.
    recent: RecentEntries,
    /// The key hash's state after the salt and the first audiences asked for (the server's
    /// API audiences, which nearly every request asks for), so that those keys hash only the
    /// token: one SHA-256 block less per request.
    common_prefix: OnceLock<(Vec<String>, Sha256)>,
}

impl std::fmt::Debug for CachedTokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedTokenAuthenticator")
            .field("inner", &self.inner.name())
            .field("success_ttl", &self.success_ttl)
            .field("failure_ttl", &self.failure_ttl)
            .field("entries", &self.cache.entry_count())
            .finish()
    }
}

impl CachedTokenAuthenticator {
    /// Caches accepted tokens for `success_ttl` (capped by each token's expiry) and rejected
    /// or unknown ones (`NotMine` and `Invalid`, as kube's apiserver cache, which caches
    /// errors too) for `failure_ttl`. A zero TTL disables caching of that kind of result;
    /// concurrent checks of one token are still shared.
    pub fn new(
        inner: Arc<dyn TokenAuthenticator>,
        success_ttl: Duration,
        failure_ttl: Duration,
    ) -> Self {
        CachedTokenAuthenticator {
            inner,
            id: rand::random(),
            success_ttl,
            failure_ttl,
            salt: rand::random(),
            cache: moka::future::Cache::builder()
                .max_capacity(MAX_ENTRIES)
                .expire_after(PerEntryTtl)
                .build(),
            recent: RecentEntries::new(),
            common_prefix: OnceLock::new(),
        }
    }

    /// A hash of everything the outcome depends on. Each part is length-prefixed so that
    /// different (audiences, token) pairs can never produce the same byte stream.
    fn key(&self, token: &str, audiences: &[String]) -> Key {
        let (common, state) = self
            .common_prefix
            .get_or_init(|| (audiences.to_vec(), self.prefix(audiences)));
        let mut hasher = if common[..] == *audiences {
            state.clone()
        } else {
            self.prefix(audiences)
        };
        hasher.update((token.len() as u64).to_be_bytes());
        hasher.update(token.as_bytes());
        hasher.finalize().into()
    }

    /// The key hash over the salt and `audiences`, ready for the token.
    fn prefix(&self, audiences: &[String]) -> Sha256 {
        let mut hasher = Sha256::new();
        hasher.update(self.salt);
        hasher.update((audiences.len() as u64).to_be_bytes());
        for audience in audiences {
            hasher.update((audience.len() as u64).to_be_bytes());
            hasher.update(audience.as_bytes());
        }
        hasher
    }

    /// The entry for `key` from the table of recent entries, if it is still good; a stale one
    /// is dropped from the table.
    fn recent_entry(&self, key: &Key) -> Option<Arc<Entry>> {
        let entry = self.recent.get(key, Instant::now())?;
        if entry.usable(SystemTime::now()) {
            return Some(entry);
        }
        self.recent.forget(key);
        None
    }

    /// How long `outcome` may be remembered, or `None` if it must not be.
    fn ttl_for(&self, outcome: &TokenOutcome, now: SystemTime) -> Option<Duration> {
        let ttl = match outcome {
            TokenOutcome::Authenticated(result) => match result.expires_at {
                // A token that has already expired is passed on once, never remembered.
                Some(at) => self
                    .success_ttl
                    .min(at.duration_since(now).unwrap_or(Duration::ZERO)),
                None => self.success_ttl,
            },
            TokenOutcome::NotMine | TokenOutcome::Invalid(_) => self.failure_ttl,
        };
        (!ttl.is_zero()).then_some(ttl)
    }
}

#[async_trait::async_trait]
impl TokenAuthenticator for CachedTokenAuthenticator {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn authenticate_token_now(
        &self,
        token: &str,
        audiences: &[String],
        memo: Option<&TokenMemo>,
    ) -> Option<TokenOutcome> {
        let entry = self.recent_entry(&self.key(token, audiences))?;
        let outcome = entry.outcome.clone();
        // The caller asked the memo first (`recall_token`); it missed, so remember this one.
        if let Some(memo) = memo {
            memo.remember(self.id, token, audiences, entry);
        }
        Some(outcome)
    }

    fn recall_token(
        &self,
        bearer: &[u8],
        audiences: &[String],
        memo: &TokenMemo,
    ) -> Option<TokenOutcome> {
        memo.recall(self.id, bearer, audiences)
    }

    async fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
        let key = self.key(token, audiences);
        // Fastest path: the entry was served or stored recently.
        if let Some(entry) = self.recent_entry(&key) {
            return entry.outcome.clone();
        }
        // Fast path: a plain lookup for a live cached answer, without the bookkeeping
        // `try_get_with` does to coalesce concurrent misses.
        if let Some(entry) = self.cache.get(&key).await {
            if entry.usable(SystemTime::now()) {
                let outcome = entry.outcome.clone();
                self.recent.put(key, entry);
                return outcome;
            }
        }
        // Two rounds at most: a hit that outlived its token's expiry is dropped and looked up
        // again once; should that race with another stale insert, ask the source directly.
        for _ in 0..2 {
            let looked_up = self
                .cache
                .try_get_with(key, async {
                    let outcome = self.inner.authenticate_token(token, audiences).await;
                    match self.ttl_for(&outcome, SystemTime::now()) {
                        Some(ttl) => Ok(Arc::new(Entry::new(outcome, ttl))),
                        // Not stored, but still handed to every caller waiting on this key,
                        // which is how concurrent checks share one call.
                        None => Err(outcome),
                    }
                })
                .await;
            match looked_up {
                Ok(entry) if entry.usable(SystemTime::now()) => {
                    let outcome = entry.outcome.clone();
                    self.recent.put(key, entry);
                    return outcome;
                }
                Ok(_) => self.cache.invalidate(&key).await,
                Err(shared) => return (*shared).clone(),
            }
        }
        self.inner.authenticate_token(token, audiences).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authn::bearer::TokenReviewResult;
    use crate::user::UserInfo;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Accepts `good` (optionally expiring), rejects `bad`, ignores the rest, slowly.
    struct Counting {
        calls: AtomicUsize,
        delay: Duration,
        expires_in: Option<Duration>,
    }

    fn counting(delay: Duration, expires_in: Option<Duration>) -> Arc<Counting> {
        Arc::new(Counting {
            calls: AtomicUsize::new(0),
            delay,
            expires_in,
        })
    }

    #[async_trait::async_trait]
    impl TokenAuthenticator for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        async fn authenticate_token(&self, token: &str, audiences: &[String]) -> TokenOutcome {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            match token {
                "good" => TokenOutcome::Authenticated(TokenReviewResult {
                    user: Arc::new(UserInfo::new("alice", vec![])),
                    audiences: audiences.to_vec().into(),
                    expires_at: self.expires_in.map(|d| SystemTime::now() + d),
                }),
                "bad" => TokenOutcome::Invalid("rejected".into()),
                _ => TokenOutcome::NotMine,
            }
        }
    }

    fn calls(c: &Counting) -> usize {
        c.calls.load(Ordering::SeqCst)
    }

    const SHORT: Duration = Duration::from_millis(300);
    const LONG: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn success_is_cached_for_its_ttl() {
        let inner = counting(Duration::ZERO, None);
        let cached = CachedTokenAuthenticator::new(inner.clone(), SHORT, Duration::ZERO);
        let first = cached.authenticate_token("good", &[]).await;
        assert!(matches!(first, TokenOutcome::Authenticated(_)));
        assert_eq!(cached.authenticate_token("good", &[]).await, first);
        assert_eq!(calls(&inner), 1);
        tokio::time::sleep(SHORT + Duration::from_millis(200)).await;
        assert_eq!(cached.authenticate_token("good", &[]).await, first);
        assert_eq!(calls(&inner), 2, "asked again after the TTL");
    }

    #[tokio::test]
    async fn failures_follow_the_failure_ttl() {
        let inner = counting(Duration::ZERO, None);
        let uncached = CachedTokenAuthenticator::new(inner.clone(), LONG, Duration::ZERO);
        for _ in 0..3 {
            assert_eq!(
                uncached.authenticate_token("bad", &[]).await,
                TokenOutcome::Invalid("rejected".into())
            );
            assert_eq!(
                uncached.authenticate_token("unknown", &[]).await,
                TokenOutcome::NotMine
            );
        }
        assert_eq!(calls(&inner), 6, "failure TTL 0 caches nothing");

        let inner = counting(Duration::ZERO, None);
        let cached = CachedTokenAuthenticator::new(inner.clone(), LONG, SHORT);
        for _ in 0..3 {
            cached.authenticate_token("bad", &[]).await;
            cached.authenticate_token("unknown", &[]).await;
        }
        assert_eq!(calls(&inner), 2);
        tokio::time::sleep(SHORT + Duration::from_millis(200)).await;
        assert_eq!(
            cached.authenticate_token("bad", &[]).await,
            TokenOutcome::Invalid("rejected".into())
        );
        assert_eq!(calls(&inner), 3);
    }

    #[tokio::test]
    async fn success_never_outlives_token_expiry() {
        let inner = counting(Duration::ZERO, Some(SHORT));
        let cached = CachedTokenAuthenticator::new(inner.clone(), LONG, Duration::ZERO);
        cached.authenticate_token("good", &[]).await;
        cached.authenticate_token("good", &[]).await;
        assert_eq!(calls(&inner), 1);
        tokio::time::sleep(SHORT + Duration::from_millis(200)).await;
        cached.authenticate_token("good", &[]).await;
        assert_eq!(calls(&inner), 2, "the entry ended with the token");

        // Already expired when returned: passed on, never remembered.
        let inner = counting(Duration::ZERO, Some(Duration::ZERO));
        let cached = CachedTokenAuthenticator::new(inner.clone(), LONG, Duration::ZERO);
        cached.authenticate_token("good", &[]).await;
        cached.authenticate_token("good", &[]).await;
        assert_eq!(calls(&inner), 2);
    }

    #[test]
    fn stale_entries_are_not_usable() {
        let past = SystemTime::now() - Duration::from_secs(1);
        let entry = Entry::new(
            TokenOutcome::Authenticated(TokenReviewResult {
                user: Arc::new(UserInfo::new("alice", vec![])),
                audiences: vec![].into(),
                expires_at: Some(past),
            }),
            LONG,
        );
        assert!(!entry.usable(SystemTime::now()));
        let failure = Entry::new(TokenOutcome::NotMine, LONG);
        assert!(failure.usable(SystemTime::now()));
    }

    #[test]
    fn recent_entries_serve_only_their_own_live_key() {
        let recent = RecentEntries::new();
        let key: Key = [7; 32];
        let now = Instant::now();
        assert!(recent.get(&key, now).is_none());
        recent.put(key, Arc::new(Entry::new(TokenOutcome::NotMine, LONG)));
        assert!(recent.get(&key, now).is_some());
        assert!(
            recent.get(&key, now + LONG + LONG).is_none(),
            "never served past its deadline"
        );
        // Same slot (same first eight bytes), another key: not served, and not forgotten.
        let mut neighbour = key;
        neighbour[31] ^= 1;
        assert!(recent.get(&neighbour, now).is_none());
        recent.forget(&neighbour);
        assert!(recent.get(&key, now).is_some());
        recent.forget(&key);
        assert!(recent.get(&key, now).is_none());
    }

    #[tokio::test]
    async fn hits_are_served_from_recent_entries_within_the_ttl() {
        let inner = counting(Duration::ZERO, None);
        let cached = CachedTokenAuthenticator::new(inner.clone(), SHORT, Duration::ZERO);
        let first = cached.authenticate_token("good", &[]).await;
        let key = cached.key("good", &[]);
        assert!(cached.recent.get(&key, Instant::now()).is_some());
        // Served even once moka no longer holds it, until the entry's own deadline.
        cached.cache.invalidate(&key).await;
        assert_eq!(cached.authenticate_token("good", &[]).await, first);
        assert_eq!(calls(&inner), 1);
        tokio::time::sleep(SHORT + Duration::from_millis(200)).await;
        assert!(cached.recent.get(&key, Instant::now()).is_none());
        assert_eq!(cached.authenticate_token("good", &[]).await, first);
        assert_eq!(calls(&inner), 2, "asked again after the TTL");
    }

    #[tokio::test]
    async fn audiences_are_part_of_the_key() {
        let inner = counting(Duration::ZERO, None);
        let cached = CachedTokenAuthenticator::new(inner.clone(), LONG, LONG);
        let a = vec!["a".to_string()];
        let ab = vec!["a".to_string(), "b".to_string()];
        match cached.authenticate_token("good", &a).await {
            TokenOutcome::Authenticated(r) => assert_eq!(*r.audiences, a[..]),
            other => panic!("unexpected {other:?}"),
        }
        match cached.authenticate_token("good", &ab).await {
            TokenOutcome::Authenticated(r) => assert_eq!(*r.audiences, ab[..]),
            other => panic!("unexpected {other:?}"),
        }
        cached.authenticate_token("good", &a).await;
        assert_eq!(calls(&inner), 2);
        // Length prefixes keep ("ab", token "c") apart from ("a", token "bc").
        assert_ne!(
            cached.key("c", &["ab".to_string()]),
            cached.key("bc", &["a".to_string()])
        );
        assert_ne!(
            cached.key("good", &[]),
            cached.key("good", &[String::new()])
        );
    }

    #[test]
    fn keys_from_the_common_prefix_equal_keys_hashed_in_full() {
        let cached = CachedTokenAuthenticator::new(counting(Duration::ZERO, None), LONG, LONG);
        let in_full = |token: &str, audiences: &[&str]| -> Key {
            let mut hasher = Sha256::new();
            hasher.update(cached.salt);
            hasher.update((audiences.len() as u64).to_be_bytes());
            for audience in audiences {
                hasher.update((audience.len() as u64).to_be_bytes());
                hasher.update(audience.as_bytes());
            }
            hasher.update((token.len() as u64).to_be_bytes());
            hasher.update(token.as_bytes());
            hasher.finalize().into()
        };
        let api = vec!["https://kubernetes.default.svc.cluster.local".to_string()];
        // The first call fixes the common prefix; later ones reuse it or hash in full.
        assert_eq!(cached.key("t1", &api), in_full("t1", &[&api[0]]));
        assert_eq!(cached.key("t2", &api), in_full("t2", &[&api[0]]));
        assert_eq!(cached.key("t1", &[]), in_full("t1", &[]));
        let other = ["a".to_string(), "b".to_string()];
        assert_eq!(cached.key("t1", &other), in_full("t1", &["a", "b"]));
        assert_ne!(cached.key("t1", &other), cached.key("t1", &api));
    }

    #[tokio::test]
    async fn immediate_answers_come_only_from_recent_entries() {
        let inner = counting(Duration::ZERO, None);
        let cached = CachedTokenAuthenticator::new(inner.clone(), LONG, LONG);
        let api = vec!["api".to_string()];
        assert_eq!(
            cached.authenticate_token_now("good", &api, None),
            None,
            "nothing yet"
        );
        let first = cached.authenticate_token("good", &api).await;
        assert!(matches!(first, TokenOutcome::Authenticated(_)));
        assert_eq!(
            cached.authenticate_token_now("good", &api, None),
            Some(first)
        );
        assert_eq!(
            cached.authenticate_token_now("good", &["other".to_string()], None),
            None,
            "other audiences are another key"
        );
        assert_eq!(cached.authenticate_token_now("bad", &api, None), None);
        let rejected = cached.authenticate_token("bad", &api).await;
        assert_eq!(
            cached.authenticate_token_now("bad", &api, None),
            Some(rejected)
        );
        assert_eq!(calls(&inner), 2, "immediate answers never ask the source");
    }

    #[tokio::test]
    async fn a_connection_memo_answers_its_last_token_only() {
        let inner = counting(Duration::ZERO, None);
        let cached = CachedTokenAuthenticator::new(inner.clone(), LONG, LONG);
        let api = vec!["api".to_string()];
        let memo = TokenMemo::default();
        let good = cached.authenticate_token("good", &api).await;
        assert!(matches!(good, TokenOutcome::Authenticated(_)));
        assert_eq!(
            cached.authenticate_token_now("good", &api, Some(&memo)),
            Some(good.clone())
        );
        // Filled: the memo answers with the table of recent entries emptied.
        cached.recent.forget(&cached.key("good", &api));
        assert_eq!(cached.authenticate_token_now("good", &api, None), None);
        assert_eq!(
            cached.recall_token(b"good", &api, &memo),
            Some(good.clone())
        );
        // The token ends at the first space: what follows it does not matter, but a longer
        // or shorter token, or one split by a space, is another token.
        assert_eq!(
            cached.recall_token(b"good trailing words", &api, &memo),
            Some(good.clone())
        );
        for other in [&b"goodX"[..], b"goodX y", b"goo", b"goo d", b" good", b""] {
            assert_eq!(memo.recall(cached.id, other, &api), None, "{other:?}");
        }
        // A token of the same length, other audiences, another cache: not from the memo.
        assert_eq!(memo.recall(cached.id, b"gooe", &api), None);
        assert_eq!(memo.recall(cached.id, b"good", &[]), None);
        let other = CachedTokenAuthenticator::new(counting(Duration::ZERO, None), LONG, LONG);
        assert_eq!(
            other.recall_token(b"good", &api, &memo),
            None,
            "a memo filled by one cache answers nothing for another"
        );
        // One token at a time: the next one replaces it.
        let bad = cached.authenticate_token("bad", &api).await;
        assert_eq!(
            cached.authenticate_token_now("bad", &api, Some(&memo)),
            Some(bad)
        );
        assert_eq!(memo.recall(cached.id, b"good", &api), None);
        assert_eq!(calls(&inner), 2, "the memo never asks the source");
        assert!(!format!("{memo:?}").contains("good"));
    }

    #[tokio::test]
    async fn a_connection_memo_never_outlives_its_entry() {
        let cached = CachedTokenAuthenticator::new(counting(Duration::ZERO, None), SHORT, LONG);
        let api = vec!["api".to_string()];
        let memo = TokenMemo::default();
        let good = cached.authenticate_token("good", &api).await;
        assert_eq!(
            cached.authenticate_token_now("good", &api, Some(&memo)),
            Some(good)
        );
        tokio::time::sleep(SHORT + Duration::from_millis(100)).await;
        assert_eq!(cached.recall_token(b"good", &api, &memo), None);
        assert!(memo.slot().is_none(), "a stale memo is dropped");
        assert_eq!(
            cached.authenticate_token_now("good", &api, Some(&memo)),
            None,
            "past its TTL the token is looked up again"
        );
    }

    #[test]
    fn constant_time_equality_sees_every_byte() {
        for len in [0usize, 1, 7, 8, 9, 16, 63, 64, 65, 72, 1100] {
            let a: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            assert!(equal_in_constant_time(&a, &a.clone()), "len {len}");
            for i in 0..len {
                let mut b = a.clone();
                b[i] ^= 0x80;
                assert!(!equal_in_constant_time(&a, &b), "len {len}, byte {i}");
            }
        }
        assert!(!equal_in_constant_time(b"ab", b"abc"));
        assert!(!equal_in_constant_time(b"", b"a"));
    }

    #[tokio::test]
    async fn keys_do_not_contain_the_token() {
        let cached = CachedTokenAuthenticator::new(counting(Duration::ZERO, None), LONG, LONG);
        let other = CachedTokenAuthenticator::new(counting(Duration::ZERO, None), LONG, LONG);
        let token = "a-fairly-long-secret-token-value";
        let key = cached.key(token, &[]);
        assert!(!key
            .windows(8)
            .any(|w| token.as_bytes().windows(8).any(|t| t == w)));
        assert_ne!(key, other.key(token, &[]), "salted per instance");
        assert!(!format!("{cached:?}").contains(token));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_lookups_share_one_call() {
        for (success_ttl, failure_ttl, token) in [
            (LONG, LONG, "good"),
            (LONG, Duration::ZERO, "bad"),
            (Duration::ZERO, Duration::ZERO, "good"),
        ] {
            let inner = counting(Duration::from_millis(200), None);
            let cached = Arc::new(CachedTokenAuthenticator::new(
                inner.clone(),
                success_ttl,
                failure_ttl,
            ));
            let tasks: Vec<_> = (0..16)
                .map(|_| {
                    let cached = cached.clone();
                    tokio::spawn(async move { cached.authenticate_token(token, &[]).await })
                })
                .collect();
            let mut outcomes = Vec::new();
            for task in tasks {
                outcomes.push(task.await.expect("task"));
            }
            assert!(outcomes.windows(2).all(|w| w[0] == w[1]));
            assert_eq!(
                calls(&inner),
                1,
                "token {token}, ttls {success_ttl:?}/{failure_ttl:?}"
            );
        }
    }
}
