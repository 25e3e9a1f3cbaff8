//! Batched fetches of etcd's current revision that stay linearizable (the "batching of
//! linearizable reads" trick): at most one fetch runs and at most one more is pending.
//!
//! Every consistent read (a GET or LIST without `resourceVersion`) needs a revision at least
//! as new as every write acknowledged before the read arrived. Sharing the fetch that is
//! already running would be wrong: it may have read the revision before the caller arrived,
//! missing a write the caller has seen acknowledged. So a caller arriving while a fetch runs
//! joins the *next* fetch, which starts when the running one ends; everyone who arrives in
//! the meantime joins that same next fetch. Each caller thus gets a revision read entirely
//! after it arrived, and under load one etcd round trip serves a whole batch of reads.
//!
//! Fetches run in a spawned task, so a caller that goes away (a client hung up) never
//! cancels the fetch other callers wait for. A failed fetch (etcd unreachable for the whole
//! request timeout) also answers the batch waiting behind it: an error is never stale, and
//! those callers should not wait out a second timeout. The next caller starts afresh.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use crate::storage::{Revision, StoreError};

type Outcome = Result<Revision, StoreError>;
/// One fetch of the current revision.
pub(super) type FetchFuture = Pin<Box<dyn Future<Output = Outcome> + Send>>;
type Fetch = Arc<dyn Fn() -> FetchFuture + Send + Sync>;
/// Where a batch's waiters receive its outcome (`None` until the fetch ends).
type Batch = watch::Sender<Option<Outcome>>;

/// See the module docs.
pub(super) struct SingleFlight {
    fetch: Fetch,
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// Whether a fetch is running (its waiters hold receivers of its own batch).
    running: bool,
    /// The batch that starts when the running fetch ends: the callers that arrived while it
    /// ran.
    next: Option<Batch>,
    /// Fetches started so far (for tests and diagnostics).
    fetches: u64,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

impl SingleFlight {
    pub(super) fn new(fetch: impl Fn() -> FetchFuture + Send + Sync + 'static) -> SingleFlight {
        SingleFlight {
            fetch: Arc::new(fetch),
            state: Arc::default(),
        }
    }

    /// A revision read entirely after this call. The caller joins its batch when this is
    /// called (not when the future is first polled), which is what makes the answer fresh
    /// enough: everything acknowledged before the call is included. Must be called within a
    /// tokio runtime (it may spawn the fetch).
    pub(super) fn get(&self) -> impl Future<Output = Outcome> + Send + 'static {
        let mut rx = {
            let mut state = lock(&self.state);
            if state.running {
                match &state.next {
                    Some(batch) => batch.subscribe(),
                    None => {
                        let (batch, rx) = watch::channel(None);
                        state.next = Some(batch);
                        rx
                    }
                }
            } else {
                state.running = true;
                state.fetches += 1;
                let (batch, rx) = watch::channel(None);
                tokio::spawn(drive(
                    Arc::clone(&self.fetch),
                    Arc::clone(&self.state),
                    batch,
                ));
                rx
            }
        };
        async move {
            match rx.wait_for(Option::is_some).await {
                Ok(outcome) => outcome.clone().unwrap_or_else(|| Err(ended())),
                Err(_) => Err(ended()),
            }
        }
    }

    /// How many fetches have started.
    #[cfg(test)]
    pub(super) fn fetches(&self) -> u64 {
        lock(&self.state).fetches
    }
}

fn ended() -> StoreError {
    StoreError::Unavailable("the read of etcd's current revision ended without an answer".into())
}

/// Runs fetches back to back while callers wait for one: the first batch, then whichever
/// batch gathered while the previous fetch ran.
async fn drive(fetch: Fetch, state: Arc<Mutex<State>>, first: Batch) {
    // If this task panics or is cancelled (runtime shutdown), the pending batch must not
    // wait forever for a fetch nobody will run: the guard drops it (its waiters then get an
    // error) and lets the next caller start afresh.
    struct Reset {
        state: Arc<Mutex<State>>,
        armed: bool,
    }
    impl Drop for Reset {
        fn drop(&mut self) {
            if self.armed {
                let mut state = lock(&self.state);
                state.running = false;
                state.next = None;
            }
        }
    }
    let mut reset = Reset {
        state: Arc::clone(&state),
        armed: true,
    };
    let mut batch = first;
    loop {
        let outcome = fetch().await;
        let failed = outcome.is_err();
        // No receiver left means every waiter went away: nothing to tell.
        let _ = batch.send(Some(outcome.clone()));
        let mut s = lock(&state);
        if failed {
            if let Some(next) = s.next.take() {
                let _ = next.send(Some(outcome));
            }
        }
        match s.next.take() {
            // A batch whose waiters all left needs no fetch (only a caller holding the lock
            // can join it, and this task holds it).
            Some(next) if next.receiver_count() > 0 => {
                s.fetches += 1;
                batch = next;
            }
            _ => {
                s.running = false;
                // Disarmed under the lock: once it is released a new caller may start
                // another driver, whose state this one must not reset.
                reset.armed = false;
                return;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::sync::Semaphore;

    use super::*;

    /// A fake store: `revision` is the last acknowledged write; a fetch reads it as soon as
    /// it starts, then waits for a permit from `gate` before answering (the round trip).
    struct Fake {
        revision: Arc<AtomicU64>,
        gate: Arc<Semaphore>,
        flight: SingleFlight,
    }

    fn fake() -> Fake {
        let revision = Arc::new(AtomicU64::new(1));
        let gate = Arc::new(Semaphore::new(0));
        let (r, g) = (Arc::clone(&revision), Arc::clone(&gate));
        let flight = SingleFlight::new(move || {
            let (r, g) = (Arc::clone(&r), Arc::clone(&g));
            Box::pin(async move {
                let read = r.load(Ordering::SeqCst);
                g.acquire().await.unwrap().forget();
                if read == u64::MAX {
                    return Err(StoreError::Unavailable("etcd is down".into()));
                }
                Ok(read)
            })
        });
        Fake {
            revision,
            gate,
            flight,
        }
    }

    /// Lets the spawned fetch task run until it waits on the gate.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_waiter_arriving_mid_fetch_sees_writes_acknowledged_before_it_arrived() {
        let f = fake();
        let first = f.flight.get();
        settle().await; // the first fetch has read revision 1 and is in flight
        f.revision.store(2, Ordering::SeqCst); // a write is acknowledged
        let second = f.flight.get(); // a read arrives after that acknowledgement
        let third = f.flight.get();
        f.gate.add_permits(1);
        assert_eq!(first.await.unwrap(), 1);
        settle().await;
        f.gate.add_permits(1);
        // Reusing the in-flight fetch would have answered 1 and lost the write.
        assert_eq!(second.await.unwrap(), 2);
        assert_eq!(third.await.unwrap(), 2);
        // Both late arrivals shared one fetch.
        assert_eq!(f.flight.fetches(), 2);
    }

    #[tokio::test]
    async fn many_waiters_cost_at_most_two_fetches() {
        let f = fake();
        let lead = f.flight.get();
        settle().await;
        f.revision.store(7, Ordering::SeqCst);
        let waiters: Vec<_> = (0..50).map(|_| tokio::spawn(f.flight.get())).collect();
        f.gate.add_permits(2);
        assert_eq!(lead.await.unwrap(), 1);
        for w in waiters {
            assert_eq!(w.await.unwrap().unwrap(), 7);
        }
        assert_eq!(f.flight.fetches(), 2);
        // Idle again: the next caller starts a fetch of its own.
        f.revision.store(9, Ordering::SeqCst);
        f.gate.add_permits(1);
        assert_eq!(f.flight.get().await.unwrap(), 9);
        assert_eq!(f.flight.fetches(), 3);
    }

    #[tokio::test]
    async fn an_error_answers_the_waiting_batch_too_then_the_next_caller_retries() {
        let f = fake();
        f.revision.store(u64::MAX, Ordering::SeqCst);
        let failing = f.flight.get();
        settle().await;
        let waiting = f.flight.get(); // arrived while the failing fetch ran
        f.gate.add_permits(1);
        assert!(matches!(failing.await, Err(StoreError::Unavailable(_))));
        // No second fetch (and no second timeout) for those who waited behind it.
        assert!(matches!(waiting.await, Err(StoreError::Unavailable(_))));
        assert_eq!(f.flight.fetches(), 1);
        f.revision.store(4, Ordering::SeqCst);
        f.gate.add_permits(1);
        assert_eq!(f.flight.get().await.unwrap(), 4);
        assert_eq!(f.flight.fetches(), 2);
    }

    #[tokio::test]
    async fn a_caller_that_leaves_does_not_strand_the_others() {
        let f = fake();
        let leader = f.flight.get();
        settle().await;
        drop(leader); // the client that started the fetch hung up
        let abandoned = f.flight.get();
        drop(abandoned); // so did everyone in the next batch
        f.gate.add_permits(1);
        settle().await;
        // The abandoned batch was skipped, so this caller starts (and gets) a fresh fetch.
        f.revision.store(5, Ordering::SeqCst);
        let fresh = f.flight.get();
        f.gate.add_permits(1);
        assert_eq!(fresh.await.unwrap(), 5);
        assert_eq!(f.flight.fetches(), 2);
    }
}
