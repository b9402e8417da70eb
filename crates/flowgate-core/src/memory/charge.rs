//! Charges and refunds on the memory store.

use crate::algorithm::{self, State};
use crate::clock::Clock;
use crate::store::{ChargeItem, Charges, StoreError};

use super::MemoryStore;

impl<C: Clock> MemoryStore<C> {
    /// Applies `items` now, as [`crate::Store::charge`]: the batch is checked whole first, then
    /// each item is applied to its key in order (two items of one key see each other).
    ///
    /// # Errors
    /// [`StoreError::Internal`] naming the first item whose limit takes no charges; nothing is
    /// applied then.
    pub fn charge_now(&self, items: &[ChargeItem<'_>]) -> Result<Charges, StoreError> {
        for (i, item) in items.iter().enumerate() {
            algorithm::chargeable(item.limit)
                .map_err(|e| StoreError::Internal(format!("charge item {i}: {e}")))?;
        }
        let now = self.clock.now();
        let mut out = Charges::new();
        for item in items {
            let digest = self.digest(item.key, item.limit);
            let mut shard = self.shards[Self::shard_of(&digest)].0.lock();
            let capacity = algorithm::capacity(item.limit) as f32;
            let charged = match shard.get_mut(&digest) {
                Some(entry) => {
                    let c = algorithm::charge(item.limit, &mut entry.state, now, item.amount);
                    entry.capacity = capacity;
                    c
                }
                None => {
                    let mut state = State::Empty;
                    let c = algorithm::charge(item.limit, &mut state, now, item.amount);
                    if state != State::Empty {
                        self.make_room(&mut shard, now, &[digest]);
                        shard.insert(digest, capacity, state);
                    }
                    c
                }
            };
            // Checked above; a limit cannot change between the check and here.
            out.push(charged.map_err(|e| StoreError::Internal(e.to_string()))?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::algorithm::Amount;
    use crate::{Algorithm, ChargeItem, Limit, ManualClock, MemoryStore, Quota};

    #[test]
    fn a_batch_with_a_limit_that_takes_no_charges_changes_nothing() {
        let clock = ManualClock::new(1_000_000);
        let store = MemoryStore::with_clock(clock);
        let q = "10/s".parse::<Quota>().unwrap();
        let fw = Limit::new(Algorithm::FixedWindow, q).unwrap();
        let conc = Limit::new(Algorithm::Concurrency, q).unwrap();
        let item = |limit, n| ChargeItem {
            key: "k",
            limit,
            amount: Amount::Charge(n),
        };
        let e = store
            .charge_now(&[item(&fw, 4), item(&conc, 1)])
            .unwrap_err();
        assert!(e.to_string().contains("charge item 1: concurrency"), "{e}");
        assert!(store.is_empty(), "nothing applied");
        let c = store.charge_now(&[item(&fw, 4), item(&fw, 9)]).unwrap();
        assert_eq!((c[0].applied, c[1].applied, c[1].debt), (4, 9, 3));
        assert_eq!(store.len(), 1);
        let r = store
            .charge_now(&[ChargeItem {
                amount: Amount::Refund(100),
                ..item(&fw, 0)
            }])
            .unwrap();
        assert_eq!((r[0].applied, r[0].dropped), (13, 87));
    }
}
