//! A fixed-capacity FIFO allocated once at start-up, for the PFC frames a port waits to send
//! (`EgressPort::pfc_out`): they must never allocate on the packet path, and `VecDeque` would
//! grow instead of refusing. (Data frames queue in `egress::queues`, lists through the packet
//! slots: a ring per queue would have to be as long as the whole buffer.)

/// A FIFO of `Copy` items whose capacity is fixed at creation: a push to a full ring fails rather
/// than allocate.
#[derive(Debug)]
pub struct Ring<T: Copy + Default> {
    slots: Box<[T]>,
    head: usize,
    len: usize,
}

impl<T: Copy + Default> Ring<T> {
    /// A ring of `capacity` items (at least one), its memory touched now rather than on the packet
    /// path.
    pub fn with_capacity(capacity: usize) -> Self {
        let mut slots = vec![T::default(); capacity.max(1)];
        // Touch every page now (the allocator hands out lazily mapped zero pages): a page fault
        // on the packet path costs more than a burst.
        std::hint::black_box(&mut slots);
        slots.fill(T::default());
        Ring {
            slots: slots.into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    /// Items queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether a push would fail.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    /// Returns the item back when the ring is full.
    #[inline]
    pub fn push(&mut self, item: T) -> Result<(), T> {
        if self.is_full() {
            return Err(item);
        }
        let mut idx = self.head + self.len;
        if idx >= self.slots.len() {
            idx -= self.slots.len();
        }
        self.slots[idx] = item;
        self.len += 1;
        Ok(())
    }

    /// The oldest item, left in place.
    #[inline]
    pub fn front(&self) -> Option<&T> {
        (self.len > 0).then(|| &self.slots[self.head])
    }

    /// The queued items, oldest first, for editing in place (a waiting PFC request takes a
    /// newer request's times instead of a second place in the ring).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        let first = self.len.min(self.slots.len() - self.head);
        let wrapped = self.len - first;
        let (front, back) = self.slots.split_at_mut(self.head);
        back[..first].iter_mut().chain(front[..wrapped].iter_mut())
    }

    /// Takes the oldest item.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let item = self.slots[self.head];
        self.head += 1;
        self.len -= 1;
        if self.head == self.slots.len() || self.len == 0 {
            // Restart at the front when empty: a queue that rarely builds up then keeps
            // reusing the same few cache lines instead of streaming through the whole ring.
            self.head = 0;
        }
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn behaves_like_a_bounded_vecdeque(cap in 1usize..16, ops in proptest::collection::vec(any::<Option<u8>>(), 0..200)) {
            let mut ring = Ring::<u8>::with_capacity(cap);
            let mut model = std::collections::VecDeque::new();
            for op in ops {
                match op {
                    Some(v) => {
                        let r = ring.push(v);
                        if model.len() < cap { model.push_back(v); prop_assert!(r.is_ok()); } else { prop_assert_eq!(r, Err(v)); }
                    }
                    None => prop_assert_eq!(ring.pop(), model.pop_front()),
                }
                prop_assert_eq!(ring.len(), model.len());
                prop_assert_eq!(ring.front().copied(), model.front().copied());
                let items: Vec<u8> = ring.iter_mut().map(|v| *v).collect();
                prop_assert_eq!(items, model.iter().copied().collect::<Vec<_>>());
            }
        }
    }
}
