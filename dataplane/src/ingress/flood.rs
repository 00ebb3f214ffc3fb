//! Flood groups: the copies of one flooded frame share one charge on its ingress PG.
//!
//! A frame whose destination is unknown goes to every other port. Each copy has its own packet
//! slot (ECN marking rewrites in place) and its own charge on its egress queue and the pool,
//! but the PG is charged once, for the one frame that arrived, as an ASIC stores a flooded
//! frame once and replicates it at egress. Charged per copy, as before, a frame flooded to
//! 15 ports used 15 frames of its PG's headroom, which is sized for one: a lossless incast
//! with unknown destinations overflowed it (issue 21, item 3). The PG's cells come back when
//! the last copy has left (sent or dropped), wherever the copies went.
//!
//! A group is a small record reached by number: a count of copies still held (plus one held
//! by the flood itself while it sends the copies out, so the group cannot end half-way), and
//! what to give back when it ends. Allocated once, with one record per packet slot (a group
//! always holds at least one slot until its last copy is handed to the egress side, and a
//! flood of n copies takes n slots), taken and returned through a free list: nothing is
//! allocated on the packet path.

/// No group: a frame that was not flooded (or flooded to one port only).
pub const NO_GROUP: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, Default)]
struct Group {
    /// Copies still held, plus one while the flood is sending them.
    refs: u16,
    cells: u16,
    /// The port index the frame came in on (up to 8191) and its PG: `in_port << 3 | pg`, so
    /// a record stays 6 bytes (`controlplane::memory::FLOOD_BYTES`) with 512 ports.
    src: u16,
}

/// What a group that ended gives back to its PG.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupEnd {
    /// Port index the flooded frame came in on.
    pub in_port: usize,
    /// The PG it was charged to.
    pub pg: usize,
    /// Cells the PG gets back.
    pub cells: u32,
}

/// The flood groups of one switch: a record per packet slot, allocated once, handed out from a free
/// list.
#[derive(Debug)]
pub struct FloodGroups {
    groups: Box<[Group]>,
    free: Vec<u32>,
}

impl FloodGroups {
    /// Room for `capacity` groups (the packet slots), all free.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.min(NO_GROUP as usize);
        FloodGroups {
            groups: vec![Group::default(); capacity].into_boxed_slice(),
            free: (0..capacity as u32).rev().collect(),
        }
    }

    /// A group for a frame of `cells` received on port index `in_port` and charged to `pg`,
    /// held by the caller until [`FloodGroups::release`]; None when every record is in use.
    #[inline]
    pub fn open(&mut self, in_port: usize, pg: usize, cells: u32) -> Option<u32> {
        let g = self.free.pop()?;
        self.groups[g as usize] = Group {
            refs: 1,
            cells: cells as u16,
            src: (in_port as u16) << 3 | (pg & 7) as u16,
        };
        Some(g)
    }

    /// One more copy of group `g` is queued somewhere.
    #[inline]
    pub fn hold(&mut self, g: u32) {
        let r = &mut self.groups[g as usize].refs;
        *r = r.saturating_add(1);
    }

    /// A copy of group `g` left (or the flood is done sending them): the PG's charge to give
    /// back when it was the last.
    #[inline]
    pub fn release(&mut self, g: u32) -> Option<GroupEnd> {
        let grp = self.groups.get_mut(g as usize)?;
        debug_assert!(grp.refs > 0, "flood group {g} released more often than held");
        grp.refs = grp.refs.saturating_sub(1);
        if grp.refs > 0 {
            return None;
        }
        self.free.push(g);
        Some(GroupEnd {
            in_port: usize::from(grp.src >> 3),
            pg: usize::from(grp.src & 7),
            cells: u32::from(grp.cells),
        })
    }

    /// Groups with copies still out (for tests and the conservation checks).
    pub fn open_groups(&self) -> usize {
        self.groups.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_ends_with_its_last_copy_and_its_record_is_reused() {
        let mut f = FloodGroups::new(2);
        let g = f.open(3, 3, 4).unwrap();
        f.hold(g);
        f.hold(g);
        assert_eq!(f.release(g), None, "the flood's own hold");
        assert_eq!(f.release(g), None, "one copy still out");
        assert_eq!(
            f.release(g),
            Some(GroupEnd {
                in_port: 3,
                pg: 3,
                cells: 4
            })
        );
        assert_eq!(f.open_groups(), 0);
        let a = f.open(0, 0, 1).unwrap();
        let b = f.open(0, 0, 1).unwrap();
        assert_ne!(a, b);
        assert_eq!(f.open(0, 0, 1), None, "full: the caller refuses the frame");
    }
}
