//! Shuffle sharding, as k8s.io/apiserver's `util/shufflesharding`: a flow's hash value deals a
//! hand of distinct queue indices from a deck of queues.

/// How many bits of a hash value may be consumed; kube keeps the last card's bias small
/// (32:33) by not using all 64.
pub const MAX_HASH_BITS: u32 = 60;

/// The largest deck kube accepts.
pub const MAX_DECK_SIZE: usize = 1 << 26;

/// The number of hash bits dealing `hand_size` cards from `deck_size` consumes (a slightly
/// conservative estimate, as kube's `RequiredEntropyBits`).
pub fn required_entropy_bits(deck_size: usize, hand_size: usize) -> u32 {
    let bits = (deck_size as f64).log2() * hand_size as f64;
    bits.ceil().max(0.0) as u32
}

/// Deals hands of `hand_size` distinct cards from a deck of `deck_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dealer {
    deck_size: usize,
    hand_size: usize,
}

impl Dealer {
    /// A dealer, or why the sizes are unusable (the same checks as kube's `NewDealer`).
    pub fn new(deck_size: usize, hand_size: usize) -> Result<Dealer, String> {
        if deck_size == 0 || hand_size == 0 {
            return Err(format!(
                "deckSize {deck_size} or handSize {hand_size} is not positive"
            ));
        }
        if hand_size > deck_size {
            return Err(format!(
                "handSize {hand_size} is greater than deckSize {deck_size}"
            ));
        }
        if deck_size > MAX_DECK_SIZE {
            return Err(format!("deckSize {deck_size} is impractically large"));
        }
        if required_entropy_bits(deck_size, hand_size) > MAX_HASH_BITS {
            return Err(format!(
                "required entropy bits of deckSize {deck_size} and handSize {hand_size} is greater than {MAX_HASH_BITS}"
            ));
        }
        Ok(Dealer {
            deck_size,
            hand_size,
        })
    }

    pub fn hand_size(&self) -> usize {
        self.hand_size
    }

    /// The hand for `hash`: `hand_size` distinct cards in `0..deck_size`, in deal order. The
    /// same hash always deals the same hand.
    pub fn deal(&self, hash: u64) -> Vec<usize> {
        self.hand(hash).as_slice().to_vec()
    }

    /// [`Dealer::deal`] without allocating (kube's `DealIntoHand`): the queue set deals a hand
    /// for every request that queues.
    pub fn hand(&self, mut hash: u64) -> Hand {
        let mut hand = Hand {
            cards: [0; MAX_HAND_SIZE],
            len: self.hand_size.min(MAX_HAND_SIZE),
        };
        // Mixed-radix digits of the hash: the i-th pick is among the deck_size - i cards left.
        for i in 0..hand.len {
            let radix = (self.deck_size - i) as u64;
            hand.cards[i] = (hash % radix) as usize;
            hash /= radix;
        }
        // Turn each pick among the remaining cards into a card of the full deck by skipping
        // the cards dealt before it (in place, from the last pick back: each pick only looks
        // at the picks before it, which are still unadjusted).
        for i in (0..hand.len).rev() {
            let mut card = hand.cards[i];
            for j in (1..=i).rev() {
                if card >= hand.cards[j - 1] {
                    card += 1;
                }
            }
            hand.cards[i] = card;
        }
        hand
    }
}

/// The most cards a hand can hold: [`Dealer::new`] refuses hands that need more than
/// [`MAX_HASH_BITS`] bits, and a hand of h cards from a deck of at least h (> 1) cards needs
/// at least h bits, so 60 is never reached (kube's largest valid hand is 15 cards).
pub const MAX_HAND_SIZE: usize = MAX_HASH_BITS as usize;

/// A dealt hand, on the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hand {
    cards: [usize; MAX_HAND_SIZE],
    len: usize,
}

impl Hand {
    pub fn as_slice(&self) -> &[usize] {
        self.cards.get(..self.len).unwrap_or(&[])
    }
}
